"""Every backend runs the same contract: add a backend by adding a name to ``BACKENDS`` and a branch
to ``open_backend``. DynamoDB runs under moto (``dynamodb_mock``): one table per module, emptied
before each test (creating the table and moto's backend cost more than the test itself)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hyperpod_scheduler.store import MemoryStore, SqliteStore, StateStore
from hyperpod_scheduler.store.records import (
    ClusterRecord,
    GroupOutcome,
    GroupSize,
    Hold,
    PendingAction,
    Snapshot,
)
from tests.store.dynamodb_mock import DYNAMODB_TABLE, clear_table, mocked_dynamodb, open_dynamodb

BACKENDS = ["memory", "sqlite", "dynamodb"]
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def open_backend(name: str, tmp_path: Path) -> StateStore:
    if name == "memory":
        return MemoryStore()
    if name == "sqlite":
        return SqliteStore(tmp_path / "state" / "state.sqlite")
    if name == "dynamodb":
        return open_dynamodb(DYNAMODB_TABLE)
    raise AssertionError(name)


@pytest.fixture(scope="module")
def _shared_dynamodb() -> Iterator[None]:
    with mocked_dynamodb(DYNAMODB_TABLE):
        yield


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    name = str(request.param)
    if name == "dynamodb":
        request.getfixturevalue("_shared_dynamodb")  # only modules with a dynamodb test start moto
        clear_table(DYNAMODB_TABLE)
    yield name


@pytest.fixture
def store(backend: str, tmp_path: Path) -> Iterator[StateStore]:
    s = open_backend(backend, tmp_path)
    yield s
    s.close()


@pytest.fixture
def opener(backend: str, tmp_path: Path) -> Iterator[Callable[[], StateStore]]:
    """More handles on the same store (same file for SQLite; the same object for memory)."""
    shared = MemoryStore() if backend == "memory" else None
    opened: list[StateStore] = []

    def open_one() -> StateStore:
        s = shared if shared is not None else open_backend(backend, tmp_path)
        opened.append(s)
        return s

    yield open_one
    for s in opened:
        s.close()


@pytest.fixture
def make_full_record() -> Callable[..., ClusterRecord]:
    return full_record


def full_record(key: str = "111122223333/us-west-2/train", now: datetime = T0) -> ClusterRecord:
    """A record with every field set to a non-default value."""
    return ClusterRecord(
        key=key,
        snapshot=Snapshot(
            taken_at=now - timedelta(hours=1),
            sizes={
                "controller": GroupSize(count=1, min_count=1),
                "workers": GroupSize(count=16, min_count=None),
                "login": GroupSize(count=2, min_count=0),
            },
            transition_id="stop@2026-03-01T19:00:00+00:00",
            reason="schedule office-hours",
        ),
        applied_state="stopped",
        applied_transition_at=now - timedelta(hours=13),
        pending=PendingAction(
            transition_id="start@2026-03-02T08:00:00+01:00",
            action="start",
            phase="sent",
            request_digest="sha256:" + "ab" * 32,
            created_at=now,
            updated_at=now + timedelta(seconds=3),
            targets={"controller": 1, "workers": 16, "login": 2},
            transition_at=now,
        ),
        last_outcomes=[
            GroupOutcome(group="workers", outcome="partial", current=12, target=16, detail="capacity"),
            GroupOutcome(group="controller", outcome="restored", current=1, target=1),
        ],
        hold=Hold(state="running", until=now + timedelta(days=2), by="alice", reason="deadline"),
        start_durations_s=[612.5, 700.0, 655.25],
        updated_at=now + timedelta(seconds=3),
    )
