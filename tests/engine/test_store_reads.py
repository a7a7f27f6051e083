"""What a tick asks of the state store: a quiet cluster's record is read once (the training-plan watch
after the turn reuses the turn's read); a due one is read once more under the lease, and acted on as
it is then (a write by another runner in between is seen, never lost); a first sight reads nothing
twice before the lease."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.memory import MemoryStore
from hyperpod_scheduler.store.records import ClusterRecord, Reach
from tests.engine.conftest import CountingClient, settle, three_tier_request, tick_until_settled

SUNDAY = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)  # the office schedule wants the cluster stopped
MONDAY = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
OFFICE = "Mon-Fri 08:00-18:00 UTC"


class ReadCounting(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.account_reads = 0
        self.before_lease: list[str] = []  # keys to change behind the engine's back as it takes the lease

    def get(self, key: str) -> ClusterRecord | None:
        self.reads += 1
        return super().get(key)

    def account_for(self, reach: Reach) -> str | None:
        self.account_reads += 1
        return super().account_for(reach)

    def acquire_lease(self, key: str, owner: str, ttl_s: float, now: datetime) -> bool:
        if key in self.before_lease:  # another runner's write lands between the read and the lease
            self.before_lease.remove(key)
            record = super().get(key)
            assert record is not None
            super().put(record.evolve(other_runner="was here"), record.version)
        return super().acquire_lease(key, owner, ttl_s, now)


@contextmanager
def _a_new_cluster() -> Iterator[tuple[Emulator, ReadCounting, Engine, list[Governed]]]:
    """c1 under the office schedule on Sunday, running and never looked at: its first tick stops it."""
    with running_emulator(virtual_start=SUNDAY, seed=3, in_process=True) as emu:
        counting = CountingClient(emu.endpoint)
        counting.client.create_cluster(**three_tier_request())
        settle(emu, counting.client, "c1")
        store = ReadCounting()
        engine = Engine(store, lambda ref: counting.client, emu.clock.now)
        yield emu, store, engine, [Governed(ref_for("c1", "us-east-1"), "office", resolve(OFFICE, {}), False)]


@contextmanager
def _a_stopped_cluster() -> Iterator[tuple[Emulator, ReadCounting, Engine, list[Governed]]]:
    """c1 stopped by its first tick on Sunday and followed to settled."""
    with _a_new_cluster() as (emu, store, engine, fleet):
        [first] = tick(engine, fleet, emu.clock.now())
        assert first.kind == "sent", first
        result, _ = tick_until_settled(emu, engine, fleet, 30, limit=200)
        assert result.kind == "settled", result
        yield emu, store, engine, fleet


def test_a_quiet_tick_reads_the_record_once_and_a_due_start_twice() -> None:
    with _a_stopped_cluster() as (emu, store, engine, fleet):
        emu.advance(600)
        store.reads = 0
        [quiet] = tick(engine, fleet, emu.clock.now())
        assert quiet.kind == "quiet" and store.reads == 1, (quiet, store.reads)
        emu.advance((MONDAY - emu.clock.now()).total_seconds())
        store.reads = 0
        [result] = tick(engine, fleet, emu.clock.now())
        assert result.kind == "sent", result
        assert store.reads == 2  # to decide what is due, then under the lease


def test_a_first_sight_reads_each_record_once_to_decide_and_its_own_again_under_the_lease() -> None:
    with _a_new_cluster() as (emu, store, engine, fleet):
        [first] = tick(engine, fleet, emu.clock.now())
        assert first.kind == "sent", first
        # The record from before account keys (to decide what is due, then whether to adopt it), the
        # account's own (none yet), and the account's again under the lease; the binding is looked up
        # once, and the plan watch after the turn reads nothing (the cluster's groups name no plan).
        assert (store.reads, store.account_reads) == (3, 1)


def test_a_write_between_the_read_and_the_lease_is_seen_and_kept_by_the_due_start() -> None:
    with _a_stopped_cluster() as (emu, store, engine, fleet):
        emu.advance((MONDAY - emu.clock.now()).total_seconds())
        [key] = store.list_keys()
        store.before_lease.append(key)
        [result] = tick(engine, fleet, emu.clock.now())
        assert result.kind == "sent", result
        record = store.get(key)
        assert record is not None and record.pending is not None and record.pending.action == "start"
        assert getattr(record, "other_runner", None) == "was here"  # its write is not lost
