"""The SQLite store's cost per transition: two fsynced commits (the intent and its outcome), reads that
never wait behind a write in progress, and lighter commits that still survive a killed process."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.records import ClusterRecord
from hyperpod_scheduler.store.sqlite import SqliteStore
from tests.engine.conftest import CountingClient, settle, three_tier_request

SUNDAY = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)  # the office schedule wants the cluster stopped


class CommitLog:
    """Every COMMIT on the store's write connection, with the synchronous mode it ran under."""

    def __init__(self, store: SqliteStore) -> None:
        self.mode = "FULL"  # what the store opens with (its schema check is a durable write)
        self.commits: list[str] = []
        store._conn.set_trace_callback(self._statement)

    def _statement(self, sql: str) -> None:
        text = sql.strip().upper()
        if text.startswith("PRAGMA SYNCHRONOUS"):
            self.mode = text.split("=")[1].strip()
        elif text == "COMMIT":
            self.commits.append(self.mode)

    def durable(self) -> int:
        return sum(1 for mode in self.commits if mode == "FULL")


def test_a_stop_costs_two_durable_commits_its_intent_and_its_outcome(tmp_path: Path) -> None:
    with running_emulator(virtual_start=SUNDAY, seed=3) as emu:
        counting = CountingClient(emu.endpoint)
        counting.client.create_cluster(**three_tier_request())
        settle(emu, counting.client, "c1")
        with SqliteStore(tmp_path / "state.sqlite") as store:
            log = CommitLog(store)
            engine = Engine(store, lambda ref: counting.client, emu.clock.now)
            fleet = [Governed(ref_for("c1", "us-east-1"), "office", resolve("Mon-Fri 08:00-18:00 UTC", {}), False)]
            [first] = tick(engine, fleet, emu.clock.now())
            assert first.kind == "sent", first
            looks = 0
            while True:
                emu.advance(20)
                [result] = tick(engine, fleet, emu.clock.now())
                looks += 1
                if result.kind != "in-progress":
                    break
            assert result.kind == "settled", result
            record = store.get(ref_for("c1", "us-east-1", account=DEFAULT_ACCOUNT).key)
            assert record is not None and record.pending is None and record.snapshot is not None
            assert {n: s.count for n, s in record.snapshot.sizes.items()} == {"controller": 1, "dev": 2, "train": 3}
            assert looks >= 2  # the follow ticks in between wrote leases only
            assert log.durable() == 2, log.commits
            assert len(log.commits) > 2  # the leases, the account and the "sent" mark: committed, not fsynced


def test_a_read_does_not_wait_for_a_write_in_progress(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "state.sqlite") as store:
        first = store.put(ClusterRecord.new("k", SUNDAY), expected_version=None)
        inside, leave = threading.Event(), threading.Event()

        def slow_writer() -> None:
            with store._write() as conn:  # a write holding the store's write side (an fsync on a slow disk)
                conn.execute("UPDATE records SET body = body WHERE key = 'k'")
                inside.set()
                leave.wait(30)

        writer = threading.Thread(target=slow_writer)
        writer.start()
        assert inside.wait(30)
        try:
            read: list[ClusterRecord | None] = []
            reader = threading.Thread(target=lambda: read.append(store.get("k")))
            reader.start()
            reader.join(10)
            assert read and read[0] is not None and read[0].version == first.version  # the last commit
            assert store.list_keys() == ["k"]
        finally:
            leave.set()
            writer.join(30)


def _lease_then_die(path: str) -> None:
    store = SqliteStore(path)
    record = store.put(ClusterRecord.new("k", SUNDAY), expected_version=None)
    store.put(record.evolve(updated_at=SUNDAY + timedelta(minutes=1)), expected_version=1, durable=False)
    assert store.acquire_lease("k", "dead-runner", 900, SUNDAY)
    os.kill(os.getpid(), signal.SIGKILL)


def test_commits_that_are_not_fsynced_survive_the_process_being_killed(tmp_path: Path) -> None:
    path = str(tmp_path / "state.sqlite")
    child = multiprocessing.get_context("spawn").Process(target=_lease_then_die, args=(path,))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    with SqliteStore(path) as store:
        record = store.get("k")
        assert record is not None and record.version == 2
        assert not store.acquire_lease("k", "someone-else", 900, SUNDAY + timedelta(minutes=5))
