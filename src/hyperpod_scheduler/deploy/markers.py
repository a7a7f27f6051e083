"""Queue markers: a part of a target that is queued or in flight is not queued again.

Without them every tick queues every target again, and a slow tick (throttled SageMaker, a large
target) piles copies of the same work onto the queue until messages expire unseen. One item per part
in the state table (``pk=queue#<account>/<region>/<i>of<n>``, ``sk=marker``) says who holds it until
when; every write is conditional, so two orchestrators (a retried tick) never both queue a part.

The life of a marker, each step with its own expiry so a death anywhere only delays, never loses:

- ``queued``: the orchestrator claims the part (conditional put: absent or expired) as queued before
  it sends the message (one write, not a claim and then a mark), and gives it back if the send fails;
  the claim lasts ``queued_s`` (hub setting) at most. The
  orchestrator takes it over sooner when the message is surely not waiting any more (the queue shows
  no visible message ``LOST_AFTER_S`` after it was queued: a worker took it and died before it said
  so, or Lambda could not run it), or when it was built from an older config than the current one.
- ``running``: a worker took the message. The worker renews it as it works (``Claim.beat``) for
  ``RUNNING_LAPSE_S`` at a time, so a worker that dies lets a tick a few minutes later queue the part
  again (the lease on each cluster keeps a late survivor and the new job apart).
- ``retrying``: the job failed and SQS hands it out again after its backoff; held until then.
- released: the worker deletes it when done, or when SQS will not retry (its last receive).

Each step names the token the orchestrator drew, and the worker acts only while the marker still
carries its job's token (``take``): a message that comes back late (a redelivery after SQS's
visibility timeout, a superseded retry) finds a newer job's token, or none, and does nothing.
Expiry is judged with the writer's clock (``expires_at`` in epoch seconds, also the table's TTL
attribute, which only tidies up: DynamoDB deletes expired items within days, not on time).
"""

from __future__ import annotations

import contextlib
import threading
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
# A running worker's claim lapses this long after its last renewal; it renews at most every RENEW_S.
# A run at the slowest SageMaker rate (throttle.FLOOR_PER_S) still makes a call a minute, each a renewal.
RUNNING_LAPSE_S = 180.0
RENEW_S = 30.0
# A queued message no longer waits on the queue if the queue shows none visible this long after it was
# sent (SQS's counts are approximate, and a worker needs a moment to say it took the message).
LOST_AFTER_S = 120.0
_FAILED = "ConditionalCheckFailedException"
_BATCH_GET = 100  # DynamoDB's limit for one BatchGetItem
_BATCH_ATTEMPTS = 5  # unprocessed keys are asked for again; what is left is treated as free (claim decides)

State = Literal["queuing", "queued", "running", "retrying"]
_FIELDS = ("token", "state", "cfg", "at", "since")


@dataclass(frozen=True)
class Held:
    """A marker as read: whose token, in which state, for the job of which tick and config version."""

    token: str
    state: str
    expires: int
    config_version: int = 0
    scheduled_at: str = ""
    since: str = ""

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Held:
        def text(name: str) -> str:
            return str(item.get(name, {}).get("S", ""))

        version = item.get("cfg", {}).get("N", "0")
        return cls(text("token"), text("state"), int(item[TTL_ATTRIBUTE]["N"]), int(version), text("at"), text("since"))

    def describe(self) -> str:
        at = f"the job of {self.scheduled_at}" if self.scheduled_at else "another job"
        return f"{at} (config version {self.config_version}, {self.state})"


def new_token() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Markers:
    """The markers of one state table, through a DynamoDB client (the hub's own role)."""

    client: Any
    table: str

    def held(self, keys: Sequence[str], now: datetime) -> dict[str, Held]:
        """The keys whose marker has not expired (one BatchGetItem per 100): a cheap first look, so a
        quiet tick writes nothing; ``claim`` still decides, conditionally."""
        found: dict[str, Held] = {}
        for i in range(0, len(keys), _BATCH_GET):
            chunk = dict.fromkeys(keys[i : i + _BATCH_GET])  # BatchGetItem refuses a key asked for twice
            wanted: dict[str, Any] = {
                self.table: {
                    "Keys": [{"pk": {"S": PREFIX + k}, "sk": {"S": SK}} for k in chunk],
                    "ProjectionExpression": "pk, #e, " + ", ".join(f"#{f}" for f in _FIELDS),
                    "ExpressionAttributeNames": {"#e": TTL_ATTRIBUTE, **{f"#{f}": f for f in _FIELDS}},
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
                        found[item["pk"]["S"].removeprefix(PREFIX)] = Held.from_item(item)
                wanted = answer.get("UnprocessedKeys") or {}
                if not wanted:
                    break
        return found

    def claim(
        self,
        key: str,
        token: str,
        now: datetime,
        *,
        scheduled_at: datetime | None = None,
        config_version: int = 0,
        over: Held | None = None,
        state: State = "queuing",
        hold_s: float = QUEUING_S,
    ) -> bool:
        """Take the part for queuing unless someone holds it; False: already queued or in flight.

        ``over``: take it from that holder (a message lost, or built from an older config) provided the
        marker is still exactly as read, so a worker that took the message meanwhile keeps it. ``state``
        and ``hold_s``: what the claim says and for how long (the orchestrator: ``queued``, ``queued_s``)."""
        item = {
            "pk": {"S": PREFIX + key},
            "sk": {"S": SK},
            "token": {"S": token},
            "state": {"S": state},
            TTL_ATTRIBUTE: {"N": _epoch(now + timedelta(seconds=hold_s))},
            "since": {"S": now.isoformat()},
            "at": {"S": (scheduled_at or now).isoformat()},
            "cfg": {"N": str(config_version)},
        }
        if over is None:
            condition = "attribute_not_exists(pk) OR #e < :now"
            names = {"#e": TTL_ATTRIBUTE}
            values: dict[str, Any] = {":now": {"N": _epoch(now)}}
        else:
            condition = "#t = :t AND #s = :s"
            names = {"#t": "token", "#s": "state"}
            values = {":t": {"S": over.token}, ":s": {"S": over.state}}
        return _conditional(
            key,
            "claim",
            lambda: self.client.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            ),
        )

    def clear_lapsed(self, key: str, now: datetime) -> bool:
        """Delete the part's marker if it has expired, so a message still carrying its token finds none."""
        return _conditional(
            key,
            "clear",
            lambda: self.client.delete_item(
                TableName=self.table,
                Key={"pk": {"S": PREFIX + key}, "sk": {"S": SK}},
                ConditionExpression="#e < :now",
                ExpressionAttributeNames={"#e": TTL_ATTRIBUTE},
                ExpressionAttributeValues={":now": {"N": _epoch(now)}},
            ),
        )

    def lookup(self, key: str) -> Held | None:
        """The part's marker as it stands (expired or not), None if there is none."""
        try:
            item = self.client.get_item(
                TableName=self.table, Key={"pk": {"S": PREFIX + key}, "sk": {"S": SK}}, ConsistentRead=True
            ).get("Item")
        except ClientError as exc:
            raise _error(key, "read", exc) from None
        except BotoCoreError as exc:
            raise AwsError(f"queue marker {key}: cannot read: {exc}") from None
        return Held.from_item(item) if item else None

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


class Claim:
    """A worker's hold on its job's part: taken once (only if it is still the job's), renewed while the
    run goes on (``beat``, from every SageMaker call and cluster turn, at most every ``every_s`` of the
    run's clock), released at the end. A renewal that finds another token stops renewing: the part was
    taken over, and the lease on each cluster keeps this run and the new one apart."""

    def __init__(
        self,
        markers: Markers,
        key: str,
        token: str,
        now: Callable[[], datetime],
        clock: Callable[[], float],
        lapse_s: float = RUNNING_LAPSE_S,
        every_s: float = RENEW_S,
    ) -> None:
        self.markers = markers
        self.key = key
        self.token = token
        self.now = now
        self.clock = clock
        self.lapse_s = lapse_s
        self.every_s = every_s
        self.renewals = 0
        self.lost = False
        self._last = clock()
        self._lock = threading.Lock()

    def _until(self) -> datetime:
        return self.now() + timedelta(seconds=self.lapse_s)

    def take(self) -> str | None:
        """Mark the part running for this job; None if done, else why this job must not act (one line)."""
        if self.markers.mark(self.key, self.token, "running", self._until()):
            return None
        holder = self.markers.lookup(self.key)
        if holder is None:
            return "its claim is gone (the part was done or given back since; the next tick queues it afresh)"
        return f"superseded by {holder.describe()}"

    def beat(self) -> None:
        with self._lock:
            if self.lost or self.clock() - self._last < self.every_s:
                return
            self._last = self.clock()
        try:
            kept = self.markers.mark(self.key, self.token, "running", self._until())
        except AwsError:
            return  # the next beat tries again; meanwhile the claim only lapses sooner
        with self._lock:
            self.renewals += 1
            self.lost = self.lost or not kept

    def release(self) -> None:
        with contextlib.suppress(AwsError):
            self.markers.release(self.key, self.token)
