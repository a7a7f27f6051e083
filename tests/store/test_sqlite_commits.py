"""The SQLite store's cost per transition: two fsynced commits (the intent and its outcome), reads that
never wait behind a write in progress, and lighter commits that still survive a killed process."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.errors import ConflictError
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry
from hyperpod_scheduler.store.sqlite import SqliteStore
from tests.engine.conftest import CountingClient, settle, three_tier_request, tick_until_settled

SUNDAY = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)  # the office schedule wants the cluster stopped
MONDAY = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)  # and started again


class CommitLog:
    """Every COMMIT on the store's write connection, and every fsync of its WAL file, in order."""

    def __init__(self, store: SqliteStore, monkeypatch: pytest.MonkeyPatch, fsync_s: float = 0.0) -> None:
        self.events: list[tuple[str, int]] = []  # ("commit" | "fsync-start" | "fsync-end" | "returned", thread)
        self._lock = threading.Lock()
        self._in_transaction = False  # the write connection is used by one thread at a time
        self._wal = os.path.realpath(str(store.path) + "-wal")
        store._conn.set_trace_callback(self._statement)
        real_fsync = os.fsync

        def fsync(fd: int) -> None:
            wal = os.path.realpath(f"/proc/self/fd/{fd}") == self._wal
            if wal:
                self.note("fsync-start")
                time.sleep(fsync_s)  # a slow disk
            real_fsync(fd)
            if wal:
                self.note("fsync-end")

        monkeypatch.setattr(os, "fsync", fsync)

    def note(self, what: str) -> None:
        with self._lock:
            self.events.append((what, threading.get_ident()))

    def _statement(self, sql: str) -> None:
        # A commit: an explicit COMMIT, or a lone write statement (its own transaction).
        text = sql.strip().upper()
        if text.startswith("BEGIN"):
            self._in_transaction = True
        elif text in ("COMMIT", "ROLLBACK"):
            self._in_transaction = False
            if text == "COMMIT":
                self.note("commit")
        elif text.startswith(("INSERT", "UPDATE", "DELETE")) and not self._in_transaction:
            self.note("commit")

    def count(self, what: str) -> int:
        return sum(1 for kind, _ in self.events if kind == what)


def test_a_stop_and_a_start_each_cost_two_durable_commits_their_intent_and_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_emulator(virtual_start=SUNDAY, seed=3, in_process=True) as emu:
        counting = CountingClient(emu.endpoint)
        counting.client.create_cluster(**three_tier_request())
        settle(emu, counting.client, "c1")
        with SqliteStore(tmp_path / "state.sqlite") as store:
            log = CommitLog(store, monkeypatch)
            engine = Engine(store, lambda ref: counting.client, emu.clock.now)
            fleet = [Governed(ref_for("c1", "us-east-1"), "office", resolve("Mon-Fri 08:00-18:00 UTC", {}), False)]
            [first] = tick(engine, fleet, emu.clock.now())
            assert first.kind == "sent", first
            result, looks = tick_until_settled(emu, engine, fleet, 20)
            assert result.kind == "settled", result
            record = store.get(ref_for("c1", "us-east-1", account=DEFAULT_ACCOUNT).key)
            assert record is not None and record.pending is None and record.snapshot is not None
            assert {n: s.count for n, s in record.snapshot.sizes.items()} == {"controller": 1, "dev": 2, "train": 3}
            assert looks >= 2  # the follow ticks in between wrote leases only
            assert log.count("fsync-end") == 2, log.events
            assert log.count("commit") > 2  # the leases, the account and the "sent" mark: committed, not fsynced
            # Monday 08:00: the start, followed through its phases (each phase seen is a write) to settled.
            stopped_fsyncs, stopped_commits = log.count("fsync-end"), log.count("commit")
            emu.advance((MONDAY - emu.clock.now()).total_seconds())
            [first] = tick(engine, fleet, emu.clock.now())
            assert first.kind == "sent", first
            result, _ = tick_until_settled(emu, engine, fleet, 30)
            assert result.kind == "settled", result
            record = store.get(ref_for("c1", "us-east-1", account=DEFAULT_ACCOUNT).key)
            assert record is not None and record.applied_state == "running" and record.group_phase_s
            assert log.count("fsync-end") - stopped_fsyncs == 2, log.events  # the start's intent and outcome
            assert log.count("commit") - stopped_commits > 3  # the sent mark and the phases: not fsynced


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


def test_durable_commits_made_at_once_share_an_fsync_and_none_returns_before_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit: eight threads each make a durable put while the disk takes 200 ms per fsync. They
    share fsyncs (fewer than eight), and every put returns only after an fsync that began after its own
    commit ended: no put is reported durable on an fsync that could have missed it."""
    with SqliteStore(tmp_path / "state.sqlite") as store:
        log = CommitLog(store, monkeypatch, fsync_s=0.2)
        start = threading.Barrier(8)

        def put(i: int) -> None:
            start.wait(30)
            store.put(ClusterRecord.new(f"k{i}", SUNDAY), expected_version=None)
            log.note("returned")

        threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert log.count("returned") == 8 and log.count("commit") == 8
        assert log.count("fsync-start") < 8, log.events  # shared: one fsync covered several commits
        for thread in {t for kind, t in log.events if kind == "returned"}:
            mine = [kind for kind, t in log.events if t == thread and kind in ("commit", "returned")]
            assert mine == ["commit", "returned"]
            committed = next(i for i, (k, t) in enumerate(log.events) if k == "commit" and t == thread)
            returned = next(i for i, (k, t) in enumerate(log.events) if k == "returned" and t == thread)
            # An fsync that started after this commit and ended before this put returned.
            starts = [i for i, (k, _) in enumerate(log.events) if k == "fsync-start" and committed < i < returned]
            ends = [i for i, (k, _) in enumerate(log.events) if k == "fsync-end" and i < returned]
            assert any(e > s for s in starts for e in ends), (thread, log.events)
        for i in range(8):
            assert store.get(f"k{i}") is not None


def test_a_put_that_loses_its_compare_and_set_commits_and_fsyncs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SqliteStore(tmp_path / "state.sqlite") as store:
        store.put(ClusterRecord.new("k", SUNDAY), expected_version=None)
        log = CommitLog(store, monkeypatch)
        line = HistoryEntry(key="k", at=SUNDAY, action="stop", actor="a", outcome="ok")
        with pytest.raises(ConflictError):
            store.put(ClusterRecord.new("k", SUNDAY), expected_version=5, history=[line])
        assert log.count("commit") == 0 and log.count("fsync-start") == 0, log.events
        assert store.history("k") == []
