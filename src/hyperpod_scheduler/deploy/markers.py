"""Queue markers: a part of a target that is queued or in flight is not queued again.

Without them every tick queues every target again, and a slow tick (throttled SageMaker, a large
target) piles copies of the same work onto the queue until messages expire unseen. One item per part
in the state table (``pk=queue#<account>/<region>/<i>of<n>``, ``sk=marker``) says who holds it until
when; every write is conditional, so two orchestrators (a retried tick) never both queue a part.

The life of a marker, each step with its own expiry so a death anywhere only delays, never loses:

- ``queuing``: the orchestrator claims the part (conditional put: absent or expired), for
  ``QUEUING_S``; if it dies before SendMessageBatch answers, the claim lapses and a later tick queues.
- ``queued``: the message is on the queue; the claim lasts ``queued_s`` (hub setting), after which a
  message lost some other way (a purged queue) no longer blocks the part.
- ``running``: a worker took the message, for the worker's timeout plus a margin; a worker that dies
  lets the next tick queue the part again (the lease on each cluster keeps the two apart).
- released: the worker deletes it when done, or when SQS will not retry (its last receive). A retry
  keeps it ``queued`` until the message comes back.

Each step names the token the orchestrator drew, so a late worker never clears a newer claim.
Expiry is judged with the writer's clock (``expires_at`` in epoch seconds, also the table's TTL
attribute, which only tidies up: DynamoDB deletes expired items within days, not on time).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.errors import AwsError

PREFIX = "queue#"
SK = "marker"
TTL_ATTRIBUTE = "expires_at"
QUEUING_S = 120.0  # twice the orchestrator's timeout
DEFAULT_QUEUED_S = 1800.0
RUNNING_MARGIN_S = 60.0
_FAILED = "ConditionalCheckFailedException"
_BATCH_GET = 100  # DynamoDB's limit for one BatchGetItem
_BATCH_ATTEMPTS = 5  # unprocessed keys are asked for again; what is left is treated as free (claim decides)

State = Literal["queuing", "queued", "running"]


def new_token() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Markers:
    """The markers of one state table, through a DynamoDB client (the hub's own role)."""

    client: Any
    table: str

    def held(self, keys: Sequence[str], now: datetime) -> set[str]:
        """The keys whose marker has not expired (one BatchGetItem per 100): a cheap first look, so a
        quiet tick writes nothing; ``claim`` still decides, conditionally."""
        found: set[str] = set()
        for i in range(0, len(keys), _BATCH_GET):
            chunk = dict.fromkeys(keys[i : i + _BATCH_GET])  # BatchGetItem refuses a key asked for twice
            wanted: dict[str, Any] = {
                self.table: {
                    "Keys": [{"pk": {"S": PREFIX + k}, "sk": {"S": SK}} for k in chunk],
                    "ProjectionExpression": "pk, #e",
                    "ExpressionAttributeNames": {"#e": TTL_ATTRIBUTE},
                    "ConsistentRead": True,
                }
            }
            for _ in range(_BATCH_ATTEMPTS):
                try:
                    answer = self.client.batch_get_item(RequestItems=wanted)
                except ClientError as exc:
                    raise _error("(batch)", "read", exc) from None
                except BotoCoreError as exc:
                    raise AwsError(f"queue markers: cannot read: {exc}") from None
                for item in answer.get("Responses", {}).get(self.table, []):
                    if int(item[TTL_ATTRIBUTE]["N"]) >= int(_epoch(now)):
                        found.add(item["pk"]["S"].removeprefix(PREFIX))
                wanted = answer.get("UnprocessedKeys") or {}
                if not wanted:
                    break
        return found

    def claim(self, key: str, token: str, now: datetime) -> bool:
        """Take the part for queuing unless someone holds it; False: already queued or in flight."""
        item = {
            "pk": {"S": PREFIX + key},
            "sk": {"S": SK},
            "token": {"S": token},
            "state": {"S": "queuing"},
            TTL_ATTRIBUTE: {"N": _epoch(now + timedelta(seconds=QUEUING_S))},
            "since": {"S": now.isoformat()},
        }
        return _conditional(
            key,
            "claim",
            lambda: self.client.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression="attribute_not_exists(pk) OR #e < :now",
                ExpressionAttributeNames={"#e": TTL_ATTRIBUTE},
                ExpressionAttributeValues={":now": {"N": _epoch(now)}},
            ),
        )

    def mark(self, key: str, token: str, state: State, until: datetime) -> bool:
        """Move the part's marker on (only if it is still ``token``'s); False if someone else holds it now."""
        return _conditional(
            key,
            "update",
            lambda: self.client.update_item(
                TableName=self.table,
                Key={"pk": {"S": PREFIX + key}, "sk": {"S": SK}},
                UpdateExpression="SET #s = :s, #e = :e",
                ConditionExpression="#t = :t",
                ExpressionAttributeNames={"#s": "state", "#e": TTL_ATTRIBUTE, "#t": "token"},
                ExpressionAttributeValues={":s": {"S": state}, ":e": {"N": _epoch(until)}, ":t": {"S": token}},
            ),
        )

    def release(self, key: str, token: str) -> bool:
        """Clear the marker if it is still ``token``'s (the part may be queued again at the next tick)."""
        return _conditional(
            key,
            "release",
            lambda: self.client.delete_item(
                TableName=self.table,
                Key={"pk": {"S": PREFIX + key}, "sk": {"S": SK}},
                ConditionExpression="#t = :t",
                ExpressionAttributeNames={"#t": "token"},
                ExpressionAttributeValues={":t": {"S": token}},
            ),
        )


def _conditional(key: str, verb: str, write: Callable[[], object]) -> bool:
    """Run a conditional write: True if it applied, False if its condition failed (someone else holds the
    marker); any other failure is one AwsError naming the marker and what was tried."""
    try:
        write()
    except ClientError as exc:
        if _code(exc) == _FAILED:
            return False
        raise _error(key, verb, exc) from None
    except BotoCoreError as exc:
        raise AwsError(f"queue marker {key}: cannot {verb}: {exc}") from None
    return True


def _epoch(at: datetime) -> str:
    return str(int(at.timestamp()))


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _error(key: str, verb: str, exc: ClientError) -> AwsError:
    err = exc.response.get("Error", {})
    return AwsError(f"queue marker {key}: cannot {verb}: {err.get('Code', 'Error')}: {err.get('Message', '')}")
