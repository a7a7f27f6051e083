"""Issue 17's sequences, each reproduced end to end as a user meets it (the CLI against a served
emulator), so every one of them would have failed before its fix.

1. two accounts, one name · 2. `start` stops the cluster · 3. one bad answer stops the fleet ·
4. an update applied but unacknowledged · 5. `run` follows its config · 6. settings that cannot work ·
7. an unsent intent mistaken for someone else's update · 8. a truncated state file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperpod_scheduler.emulator.errors import EmulatorError
from hyperpod_scheduler.store.sqlite import SqliteStore
from tests.reliability.crash_setup import Live, live_cluster
from tests.reliability.harness import SIZES, STOPPED, at_sizes, recorded_sizes, run_cli, wait_for


@pytest.fixture
def stop_live(tmp_path: Path) -> Iterator[Live]:
    yield from live_cluster(tmp_path, "stop")


# ---- 8. a store that is never silently empty -------------------------------------------------------


def test_a_state_file_truncated_to_zero_bytes_is_an_error_not_a_forgotten_fleet(stop_live: Live) -> None:
    live = stop_live
    code, out = live.cli("stop", "c1", "--wait")
    assert code == 0, out
    assert recorded_sizes(live.state) == SIZES
    live.state.write_bytes(b"")
    for command in (("status",), ("start", "c1"), ("tick",)):
        done = run_cli(live.args(*command), live.env, live.tmp)  # the real console script: exit code and stderr
        assert done.returncode != 0, f"{command}: {done.stdout}"
        assert str(live.state) in done.stderr and "empty" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "nothing recorded" not in done.stdout
    assert live.state.stat().st_size == 0


# ---- 6. settings that cannot work are refused ------------------------------------------------------


def test_a_lease_no_longer_than_the_poll_is_refused_before_anything_is_sent(stop_live: Live) -> None:
    live = stop_live
    live.config.write_text(
        "defaults: {poll_seconds: 0.05, lease_ttl_seconds: 0.05}\n"
        "targets: [{region: us-east-1, schedule: never, clusters: [c1]}]\n"
    )
    # Before: --wait gave up after its first poll ("another runner follows it now") and exited 0
    # while the cluster was still Updating.
    done = run_cli(live.args("stop", "c1", "--wait"), live.env, live.tmp)
    assert done.returncode != 0, done.stdout
    assert "lease_ttl_seconds (0.05)" in done.stderr and "poll_seconds (0.05)" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert live.tally.sent["c1"] == 0


# ---- 4. an update applied but answered 500 --------------------------------------------------------


def _outcomes(state: Path) -> list[tuple[str, str]]:
    with SqliteStore(state) as store:
        return [(e.action, e.outcome) for key in store.list_keys() for e in store.history(key)]


def test_an_update_applied_but_answered_500_is_followed_not_recorded_as_refused(stop_live: Live) -> None:
    live = stop_live
    original = live.emu.backend.dispatch
    lost: list[str] = []

    def dispatch(operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        result = original(operation, params, **kw)
        if operation == "UpdateCluster" and not lost:
            lost.append(operation)  # applied by the model; the answer is a 500
            raise EmulatorError("InternalFailure", "We encountered an internal error. Please try again.", 500)
        return result

    live.emu.backend.dispatch = dispatch  # type: ignore[method-assign]
    done = run_cli(live.args("stop", "c1", "--wait"), live.env, live.tmp)
    assert lost, "the fault never fired"
    # Before: botocore retried, the retry met ConflictException and the stop was recorded "refused"
    # while it was in flight.
    assert live.tally.sent["c1"] == 1, f"UpdateCluster reached the cluster {live.tally.sent['c1']} times"
    assert ("stop", "refused") not in _outcomes(live.state), done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    wait_for(lambda: at_sizes(live.emu, "c1", STOPPED), "c1 stopped")
    assert ("stop", "ok") in _outcomes(live.state)
    assert recorded_sizes(live.state) == SIZES
