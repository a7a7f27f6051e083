"""Bounded storage: messages from AWS are kept short in records and history (a 60 MB FailureMessage made a
126 MB state file), and the state file and the folders made for it are private whatever the umask or the
file's earlier mode."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hyperpod_scheduler.cluster.view import parse_cluster
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.store.records import (
    MAX_TEXT,
    ClusterRecord,
    GroupOutcome,
    GroupSize,
    HistoryEntry,
    Hold,
    PendingAction,
    Refusal,
    Snapshot,
)
from hyperpod_scheduler.store.sqlite import SqliteStore
from tests.engine.builders import group

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
KEY = ref_for("c1", "us-east-1").key
HUGE = "capacity " * (60 * 1024 * 1024 // 9)  # 60 MB


def test_long_messages_are_kept_short_and_say_so() -> None:
    outcome = GroupOutcome(group="g", outcome="failed", current=0, target=2, detail=HUGE)
    assert len(outcome.detail) < MAX_TEXT + 80 and outcome.detail.endswith("more characters not kept]")
    assert len(Refusal(at=T0, action="stop", reason=HUGE).reason) < MAX_TEXT + 80
    assert len(Hold(state="running", by=HUGE, reason=HUGE).reason) < MAX_TEXT + 80
    entry = HistoryEntry(
        key=KEY, at=T0, action="start", actor="a", outcome="failed", detail={"message": HUGE, "n": [HUGE, 1]}
    )
    assert len(entry.detail["message"]) < MAX_TEXT + 80 and len(entry.detail["n"][0]) < MAX_TEXT + 80
    assert entry.detail["n"][1] == 1
    short = HistoryEntry(key=KEY, at=T0, action="start", actor="a", outcome="ok", detail={"message": "fine"})
    assert short.detail == {"message": "fine"}  # short text is kept exactly


def test_a_huge_failure_message_does_not_make_a_huge_state_file(tmp_path: Path) -> None:
    answer = {
        "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefghij12",
        "ClusterName": "c1",
        "ClusterStatus": "InService",
        "FailureMessage": HUGE,
        "InstanceGroups": [group("workers", 0)],
    }
    view = parse_cluster(answer)
    assert view.failure_message is not None and len(view.failure_message) < MAX_TEXT + 80
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        sizes = {"workers": GroupSize(count=2)}
        record = ClusterRecord.new(KEY, T0).evolve(
            snapshot=Snapshot(taken_at=T0, sizes=sizes, transition_id="t", reason="stop"),
            pending=PendingAction(
                transition_id="t", action="start", phase="sent", request_digest="d", created_at=T0, updated_at=T0
            ),
            last_outcomes=[GroupOutcome(group="workers", outcome="failed", current=0, target=2, detail=HUGE)],
        )
        line = HistoryEntry(key=KEY, at=T0 + timedelta(minutes=5), action="start", actor="a", outcome="failed",
                            detail={"message": HUGE})  # fmt: skip
        store.put(record, expected_version=None, history=[line])
        assert store.history(KEY)[0].detail["message"].startswith("capacity capacity")
    assert path.stat().st_size < 1024 * 1024


def _open_under_umask_zero(path: Path) -> None:
    code = f"from hyperpod_scheduler.store.sqlite import SqliteStore; SqliteStore({str(path)!r}).close()"
    subprocess.run(
        [sys.executable, "-c", code], check=True, timeout=60, preexec_fn=lambda: os.umask(0), capture_output=True
    )


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_folders_made_for_the_state_file_are_0700_and_the_file_0600_under_umask_000(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "c" / "state.sqlite"
    _open_under_umask_zero(path)
    assert [_mode(p) for p in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c")] == [0o700] * 3
    assert _mode(path) == 0o600
    assert _mode(tmp_path) == stat.S_IMODE(tmp_path.stat().st_mode)  # a folder that was there is left alone


def test_an_existing_state_file_keeps_the_mode_its_owner_gave_it(tmp_path: Path) -> None:
    # issue 28: opening an existing file is reading it; its mode is the owner's (0600 is for a file we create).
    path = tmp_path / "state.sqlite"
    SqliteStore(path).close()
    os.chmod(path, 0o640)
    with SqliteStore(path) as store:
        store.put(ClusterRecord.new(KEY, T0), expected_version=None)
        assert _mode(path) == 0o640
        for side in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if side.exists():  # SQLite gives its -wal and -shm files the database file's mode
                assert _mode(side) == 0o640, side.name
