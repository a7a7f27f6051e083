"""What only the DynamoDB store does (the shared contract runs in tests/store for every backend)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store import StoreError, open_store
from hyperpod_scheduler.store.dynamodb import DynamoDBStore
from hyperpod_scheduler.store.records import HistoryEntry
from tests.store.dynamodb_mock import REGION, mocked_dynamodb, open_dynamodb

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
KEY = "111111111111/us-east-1/train"


@pytest.fixture
def store() -> Iterator[DynamoDBStore]:
    with mocked_dynamodb("t"):
        yield open_dynamodb("t")


def test_history_items_carry_the_ttl_attribute(store: DynamoDBStore) -> None:
    store.append_history(HistoryEntry(key=KEY, at=T0, action="stop", actor="a", outcome="ok"))
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName="t")["Items"]
    (item,) = [i for i in items if i["pk"]["S"].startswith("hist#")]
    assert int(item["expires_at"]["N"]) == int((T0 + timedelta(days=90)).timestamp())


def test_open_store_reads_a_dynamodb_url(store: DynamoDBStore) -> None:
    opened = open_store(f"dynamodb://t?region={REGION}")
    assert isinstance(opened, DynamoDBStore) and opened.table == "t"
    assert opened.get(KEY) is None


@pytest.mark.parametrize(
    ("url", "message"), [("dynamodb://", "names no table"), ("dynamodb://t?zone=x", "unknown option 'zone'")]
)
def test_open_store_refuses_a_bad_dynamodb_url(url: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        open_store(url)


def test_a_missing_table_is_a_one_line_store_error() -> None:
    with mocked_dynamodb("t"):
        missing = DynamoDBStore("nope", client=boto3.client("dynamodb", region_name=REGION))
        with pytest.raises(StoreError, match="dynamodb://nope: table not found") as err:
            missing.get(KEY)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("with_history", [False, True])
def test_an_intent_applied_whose_answer_was_lost_is_not_taken_for_another_runners(
    store: DynamoDBStore, with_history: bool
) -> None:
    """The conditional write went through, its answer was lost (a 500), botocore sent it again and met
    its own write as a failed condition: that is our write, not a conflict (issue 26 case 12)."""
    from hyperpod_scheduler.store.errors import ConflictError
    from hyperpod_scheduler.store.records import ClusterRecord

    first = store.put(ClusterRecord.new(KEY, T0), expected_version=None)
    real = store._client
    operation = "transact_write_items" if with_history else "put_item"

    class LostAnswer:
        def __getattr__(self, name: str) -> object:
            call = getattr(real, name)
            if name != operation:
                return call

            def twice(**kwargs: object) -> object:
                call(**kwargs)  # applied; its answer never arrives
                return call(**kwargs)  # the retry: condition failed on our own write

            return twice

    store._client = LostAnswer()
    intent = first.evolve(applied_state="stopped", updated_at=T0 + timedelta(minutes=1))
    lines = [HistoryEntry(key=KEY, at=T0, action="stop", actor="a", outcome="ok")] if with_history else []
    stored = store.put(intent, expected_version=first.version, history=lines)
    store._client = real
    assert stored.version == first.version + 1
    assert store.get(KEY) == stored
    assert len(store.history(KEY)) == len(lines)
    # Another runner's write in between is still a conflict.
    other = stored.evolve(applied_state="running", updated_at=T0 + timedelta(minutes=2))
    store.put(other, expected_version=stored.version)
    with pytest.raises(ConflictError):
        store.put(stored.evolve(updated_at=T0 + timedelta(minutes=3)), expected_version=stored.version)
