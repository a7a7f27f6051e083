"""The fleet store: one DynamoDB table shared by every Lambda worker (single-table design).

Items (``pk`` / ``sk``, both strings):

- record  ``rec#<key>`` / ``record``: ``ver`` (number) and ``body`` (the same JSON as SQLite).
  ``put`` is a conditional PutItem on ``ver``, so two workers never both store a write over one read.
- history ``hist#<key>`` / ``<at_us>#<seq>``: ``body``, ``at_us`` and ``expires_at`` (epoch seconds),
  the table's TTL attribute, so old entries age out without a sweeper. ``seq`` orders entries
  appended at one instant; across processes it follows the wall clock.
- lease   ``lease#<key>`` / ``lease``: ``owner`` and ``expires_us``, taken by a conditional UpdateItem.
- account ``acct#<region>/<name>`` / ``profile#<profile>``: ``account``, the account that profile reaches
  for that cluster name (learned from its ARN); one query lists every profile's binding of a name.
- config  ``config`` / ``fleet``: the fleet config (written by ``config push``; see deploy/config_store).

Reads are strongly consistent: a worker must see the intent another worker stored a moment ago.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store.base import check_expected, check_limit, lease_expiry
from hyperpod_scheduler.store.codec import (
    check_account,
    check_aware,
    check_key,
    check_reach,
    decode_histories,
    decode_history,
    decode_record,
    encode_history,
    encode_record,
    to_micros,
)
from hyperpod_scheduler.store.errors import ConflictError, StoreError
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry, Reach

DEFAULT_HISTORY_TTL = timedelta(days=90)
TTL_ATTRIBUTE = "expires_at"
RECORD_SK = "record"
LEASE_SK = "lease"
# Shifts microseconds since the epoch to a non-negative number so the zero-padded sort key orders
# instants before 1970 too (year 1 is about -6.2e16 µs).
_AT_OFFSET = 10**17
_CONDITION_FAILED = "ConditionalCheckFailedException"
_MAX_TRANSACTION_ITEMS = 100  # DynamoDB's limit for one TransactWriteItems

_seq_lock = threading.Lock()
_last_seq = 0


def _next_seq() -> int:
    """Strictly increasing in this process, close to the wall clock across processes."""
    global _last_seq
    with _seq_lock:
        _last_seq = max(_last_seq + 1, time.time_ns())
        return _last_seq


def table_definition(name: str) -> dict[str, Any]:
    """CreateTable arguments for the store's table (the hub template declares the same shape)."""
    return {
        "TableName": name,
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "BillingMode": "PAY_PER_REQUEST",
    }


def create_table(client: Any, name: str) -> None:
    """Create the table with its TTL attribute and wait until it is active (tests, first setup)."""
    client.create_table(**table_definition(name))
    client.get_waiter("table_exists").wait(TableName=name)
    client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
    )


class DynamoDBStore:
    def __init__(
        self,
        table: str,
        *,
        client: Any | None = None,
        region: str | None = None,
        history_ttl: timedelta | None = DEFAULT_HISTORY_TTL,
    ) -> None:
        if not table:
            raise StoreError("state store dynamodb://: no table name")
        self.table = table
        self.history_ttl = history_ttl
        if client is None:
            from botocore.config import Config
            from botocore.exceptions import NoRegionError

            from hyperpod_scheduler.aws.clients import session  # bounded: deadlines and answer checks

            try:
                client = session(region=region).client(
                    "dynamodb", config=Config(retries={"mode": "standard", "max_attempts": 8})
                )
            except NoRegionError:
                raise StoreError(
                    f"state store dynamodb://{table}: no region (add ?region=REGION or set AWS_REGION)"
                ) from None
        self._client = client
        self._closed = False

    def __repr__(self) -> str:
        return f"DynamoDBStore({self.table!r})"

    # -- records ---------------------------------------------------------------------------------

    def get(self, key: str) -> ClusterRecord | None:
        check_key(key)
        item = self._call("get_item", TableName=self.table, Key=_key(f"rec#{key}", RECORD_SK), ConsistentRead=True).get(
            "Item"
        )
        return None if item is None else decode_record(key, item["body"]["S"], int(item["ver"]["N"]))

    def put(
        self,
        record: ClusterRecord,
        expected_version: int | None,
        history: Sequence[HistoryEntry] = (),
        *,
        durable: bool = True,  # every DynamoDB write is durable: one call either way
    ) -> ClusterRecord:
        expected = check_expected(expected_version)
        stored = record.at_version(expected + 1)
        item = {
            **_key(f"rec#{record.key}", RECORD_SK),
            "rkey": {"S": record.key},
            "ver": {"N": str(expected + 1)},
            "body": {"S": encode_record(stored)},
            # This write's own mark: a retried write that meets itself is told apart from another
            # runner's write, even one with the same body (the same change made at the same instant).
            "wid": {"S": uuid.uuid4().hex},
        }
        if expected == 0:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            condition = {
                "ConditionExpression": "#v = :expected",
                "ExpressionAttributeNames": {"#v": "ver"},
                "ExpressionAttributeValues": {":expected": {"N": str(expected)}},
            }
        if len(history) >= _MAX_TRANSACTION_ITEMS:
            raise UsageError(f"history: {len(history)} entries in one put; at most {_MAX_TRANSACTION_ITEMS - 1}")
        try:
            if history:
                # One transaction, so the record never lands without its history lines.
                put = {"TableName": self.table, "Item": item, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
                self._call(
                    "transact_write_items",
                    TransactItems=[
                        {"Put": {**put, **condition}},
                        *({"Put": {"TableName": self.table, "Item": self._history_item(e)}} for e in history),
                    ],
                )
            else:
                self._call(
                    "put_item",
                    TableName=self.table,
                    Item=item,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **condition,
                )
        except _ConditionFailed as failed:
            old = failed.item
            if old is None:  # some DynamoDB look-alikes do not return the item: read it
                now_stored = self._call(
                    "get_item", TableName=self.table, Key=_key(f"rec#{record.key}", RECORD_SK), ConsistentRead=True
                ).get("Item")
                actual = None if now_stored is None else int(now_stored["ver"]["N"])
                ours = now_stored is not None and now_stored.get("wid") == item["wid"]
            else:
                actual = int(old["ver"]["N"])
                ours = old.get("wid") == item["wid"]
            if ours and actual == expected + 1:
                # Our own write: applied, its answer lost (a 500, a timeout) and retried by botocore, which
                # then met it as a failed condition. The write happened, with its history (one transaction).
                return stored
            raise ConflictError(record.key, expected_version, actual) from None
        return stored

    def list_keys(self) -> list[str]:
        keys = [
            item["rkey"]["S"]
            for item in self._scan(
                FilterExpression="sk = :r",
                ExpressionAttributeValues={":r": {"S": RECORD_SK}},
                ProjectionExpression="rkey",
            )
        ]
        return sorted(keys)

    # -- history ---------------------------------------------------------------------------------

    def append_history(self, entry: HistoryEntry) -> None:
        self._call("put_item", TableName=self.table, Item=self._history_item(entry))

    def _history_item(self, entry: HistoryEntry) -> dict[str, Any]:
        at_us = to_micros(entry.at)
        item: dict[str, Any] = {
            **_key(f"hist#{entry.key}", f"{at_us + _AT_OFFSET:018d}#{_next_seq():020d}"),
            "rkey": {"S": entry.key},
            "at_us": {"N": str(at_us)},
            "body": {"S": encode_history(entry)},
        }
        if self.history_ttl is not None:
            item[TTL_ATTRIBUTE] = {"N": str(int((entry.at + self.history_ttl).timestamp()))}
        return item

    def history(self, key: str, limit: int = 50) -> list[HistoryEntry]:
        check_key(key)
        check_limit(limit)
        out: list[HistoryEntry] = []
        start: dict[str, Any] | None = None
        while len(out) < limit:
            page = self._call(
                "query",
                TableName=self.table,
                KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": {"S": f"hist#{key}"}},
                ScanIndexForward=False,
                ConsistentRead=True,
                Limit=limit - len(out),
                **({"ExclusiveStartKey": start} if start else {}),
            )
            out.extend(decode_history(key, item["body"]["S"]) for item in page.get("Items", []))
            start = page.get("LastEvaluatedKey")
            if not start:
                break
        return out[:limit]

    def history_all(
        self, since: datetime | None = None, until: datetime | None = None, *, damaged: list[str] | None = None
    ) -> list[HistoryEntry]:
        # A scan: history_all serves reports, not the tick, so it trades cost for a simpler table.
        low = None if since is None else to_micros(check_aware("since", since))
        high = None if until is None else to_micros(check_aware("until", until))
        items = [i for i in self._history_items() if _within(int(i["at_us"]["N"]), low, high)]
        items.sort(key=lambda i: (int(i["at_us"]["N"]), i["sk"]["S"]))
        return decode_histories(((i["rkey"]["S"], i["body"]["S"]) for i in items), damaged)

    def prune_history(self, before: datetime) -> int:
        """Deletes what the TTL has not removed yet (DynamoDB deletes expired items within days)."""
        cut = to_micros(check_aware("before", before))
        doomed = [i for i in self._history_items() if int(i["at_us"]["N"]) < cut]
        for i in range(0, len(doomed), 25):
            requests = [{"DeleteRequest": {"Key": _key(d["pk"]["S"], d["sk"]["S"])}} for d in doomed[i : i + 25]]
            pending: dict[str, Any] = {self.table: requests}
            while pending:
                answer = self._call("batch_write_item", RequestItems=pending)
                pending = answer.get("UnprocessedItems") or {}
        return len(doomed)

    def _history_items(self) -> Iterator[dict[str, Any]]:
        return self._scan(
            FilterExpression="begins_with(pk, :h)",
            ExpressionAttributeValues={":h": {"S": "hist#"}},
        )

    # -- leases ----------------------------------------------------------------------------------

    def acquire_lease(self, key: str, owner: str, ttl_s: float, now: datetime) -> bool:
        expires = to_micros(lease_expiry(key, owner, ttl_s, now))
        return self._conditional_update(
            key,
            "SET #o = :o, #e = :e",
            "attribute_not_exists(pk) OR #o = :o OR #e <= :now",
            {":o": {"S": owner}, ":e": {"N": str(expires)}, ":now": {"N": str(to_micros(now))}},
        )

    def renew_lease(self, key: str, owner: str, ttl_s: float, now: datetime) -> bool:
        expires = to_micros(lease_expiry(key, owner, ttl_s, now))
        return self._conditional_update(
            key,
            "SET #e = :e",
            "attribute_exists(pk) AND #o = :o AND #e > :now",
            {":o": {"S": owner}, ":e": {"N": str(expires)}, ":now": {"N": str(to_micros(now))}},
        )

    def release_lease(self, key: str, owner: str) -> bool:
        check_key(key)
        try:
            self._call(
                "delete_item",
                TableName=self.table,
                Key=_key(f"lease#{key}", LEASE_SK),
                ConditionExpression="#o = :o",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":o": {"S": owner}},
            )
        except _ConditionFailed:
            return False
        return True

    def _conditional_update(self, key: str, update: str, condition: str, values: dict[str, Any]) -> bool:
        try:
            self._call(
                "update_item",
                TableName=self.table,
                Key=_key(f"lease#{key}", LEASE_SK),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames={"#o": "owner", "#e": "expires_us"},
                ExpressionAttributeValues=values,
            )
        except _ConditionFailed:
            return False
        return True

    # -- accounts --------------------------------------------------------------------------------

    def account_for(self, reach: Reach) -> str | None:
        check_reach(reach)
        item = self._call("get_item", TableName=self.table, Key=_account_key(reach), ConsistentRead=True).get("Item")
        return None if item is None else str(item["account"]["S"])

    def bind_account(self, reach: Reach, account: str, *, replace: bool = False) -> str:
        check_reach(reach)
        check_account(account)
        item = {**_account_key(reach), "account": {"S": account}}
        condition = {} if replace else {"ConditionExpression": "attribute_not_exists(pk)"}
        with contextlib.suppress(_ConditionFailed):  # bound already: the first binding wins
            self._call("put_item", TableName=self.table, Item=item, **condition)
        found = self.account_for(reach)
        return found if found is not None else account

    def accounts_named(self, region: str, name: str) -> dict[str, str]:
        out: dict[str, str] = {}
        start: dict[str, Any] | None = None
        while True:
            page = self._call(
                "query",
                TableName=self.table,
                KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": {"S": f"acct#{region}/{name}"}},
                ConsistentRead=True,
                **({"ExclusiveStartKey": start} if start else {}),
            )
            for item in page.get("Items", []):
                out[item["sk"]["S"].removeprefix("profile#")] = item["account"]["S"]
            start = page.get("LastEvaluatedKey")
            if not start:
                return out

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> DynamoDBStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the AWS edge ----------------------------------------------------------------------------

    def _scan(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        start: dict[str, Any] | None = None
        while True:
            page = self._call(
                "scan",
                TableName=self.table,
                ConsistentRead=True,
                **kwargs,
                **({"ExclusiveStartKey": start} if start else {}),
            )
            yield from page.get("Items", [])
            start = page.get("LastEvaluatedKey")
            if not start:
                return

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        if self._closed:
            raise StoreError(f"state store dynamodb://{self.table}: used after close()")
        try:
            answer: dict[str, Any] = getattr(self._client, operation)(**kwargs)
        except ClientError as exc:
            err = exc.response.get("Error", {})
            code = err.get("Code", "")
            if code == _CONDITION_FAILED:  # only conditional writes can fail this way
                old: Any = exc.response.get("Item")
                raise _ConditionFailed(old) from None
            if code == "TransactionCanceledException":
                # Only the first action (the record's Put) carries a condition; a TransactionConflict
                # is another writer on the same item at that instant, a lost race like any other.
                reasons: list[Any] = list(exc.response.get("CancellationReasons") or [])
                first = reasons[0] if reasons else {}
                if first.get("Code") == "ConditionalCheckFailed":
                    raise _ConditionFailed(first.get("Item")) from None
                if any(r.get("Code") == "TransactionConflict" for r in reasons):
                    raise _ConditionFailed(None) from None
            if code == "ResourceNotFoundException":
                raise StoreError(
                    f"state store dynamodb://{self.table}: table not found (deploy the hub template first)"
                ) from None
            raise StoreError(f"state store dynamodb://{self.table}: {code}: {err.get('Message', '')}") from None
        except BotoCoreError as exc:
            raise StoreError(f"state store dynamodb://{self.table}: {exc}") from None
        return answer


class _ConditionFailed(Exception):
    def __init__(self, item: dict[str, Any] | None) -> None:
        super().__init__("condition failed")
        self.item = item


def _account_key(reach: Reach) -> dict[str, Any]:
    # DynamoDB refuses an empty string in a key: the prefix keeps the default profile's "" non-empty.
    return _key(f"acct#{reach.region}/{reach.name}", f"profile#{reach.profile}")


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _within(at_us: int, low: int | None, high: int | None) -> bool:
    return (low is None or at_us >= low) and (high is None or at_us < high)
