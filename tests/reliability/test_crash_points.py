"""Kill the real CLI (SIGKILL) at every step boundary of stop, start and tick; the next tick converges.

After each kill: the cluster ends where its schedule wants it, the recorded sizes are intact, and the
emulator saw exactly one UpdateCluster for the transition (a second one would be a duplicate scale).
"""

from __future__ import annotations

import contextlib
import random
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hyperpod_scheduler.engine.crashpoints import ENV, POINTS
from tests.reliability.crash_setup import RECOVER_AFTER, Live, live_cluster
from tests.reliability.harness import (
    SIZES,
    STOPPED,
    at_sizes,
    recorded_sizes,
    run_cli,
    settled_lines,
    spawn_cli,
    wait_for,
)

KILLED = -signal.SIGKILL
TICK_POINTS = ("after-intent", "after-send", "after-sent", "before-settle", "after-settle")


@pytest.fixture
def stop_live(tmp_path: Path) -> Iterator[Live]:
    yield from live_cluster(tmp_path, "stop")


@pytest.fixture
def start_live(tmp_path: Path) -> Iterator[Live]:
    yield from live_cluster(tmp_path, "start")


def _stopped_by_hand(live: Live) -> None:
    """The starting point of a start: stopped once, sizes recorded; the tally starts from here."""
    code, out = live.cli("stop", "c1", "--wait")
    assert code == 0, out
    assert recorded_sizes(live.state) == SIZES
    live.tally.reset()


def _recovered(live: Live, wanted: dict[str, int]) -> None:
    at = datetime.now(UTC) + RECOVER_AFTER if wanted == STOPPED else live.start_at + RECOVER_AFTER
    live.converge(wanted, at)
    assert recorded_sizes(live.state) == SIZES, "a recorded size was lost or overwritten"
    action = "stop" if wanted == STOPPED else "start"
    assert settled_lines(live.state, action) == 1, f"the settled {action} is not in the history exactly once"
    assert live.tally.sent["c1"] <= 1, f"UpdateCluster sent {live.tally.sent['c1']} times for one transition"
    assert live.tally.accepted["c1"] == live.tally.sent["c1"]


def _killed_at(live: Live, point: str, command: str) -> None:
    """Run ``command c1 --wait`` until the crash point kills it."""
    # The fast emulator may settle an update before the child's first poll; 'while-following' needs
    # the cluster still Updating at that poll, so its clock stands still until the kill.
    holding = live.emu.paused() if point == "while-following" else contextlib.nullcontext()
    with holding:
        child = run_cli(live.args(command, "c1", "--wait"), {**live.env, ENV: point}, live.tmp)
    assert child.returncode == KILLED, f"{point} was never reached: {child.stdout}{child.stderr}"


@pytest.mark.parametrize("point", POINTS)
def test_stop_killed_at_each_point_converges(stop_live: Live, point: str) -> None:
    live = stop_live
    _killed_at(live, point, "stop")
    _recovered(live, STOPPED)
    assert live.tally.sent["c1"] == 1


@pytest.mark.parametrize("point", POINTS)
def test_start_killed_at_each_point_converges(start_live: Live, point: str) -> None:
    live = start_live
    _stopped_by_hand(live)
    _killed_at(live, point, "start")
    _recovered(live, SIZES)
    assert live.tally.sent["c1"] == 1


@pytest.mark.parametrize("point", TICK_POINTS)
def test_tick_killed_at_each_point_converges(stop_live: Live, point: str) -> None:
    live = stop_live
    now = datetime.now(UTC)
    if point in ("before-settle", "after-settle"):
        # Those points are reached by the tick that finds the stop settled: send it first, unkilled.
        code, out = live.cli("tick", "--at", now.isoformat())
        assert code == 0 and live.tally.sent["c1"] == 1, out
        wait_for(lambda: at_sizes(live.emu, "c1", STOPPED), "c1 stopped")
    child = run_cli(live.args("tick", "--at", now.isoformat()), {**live.env, ENV: point}, live.tmp)
    assert child.returncode == KILLED, f"{point} was never reached: {child.stdout}{child.stderr}"
    _recovered(live, STOPPED)
    assert live.tally.sent["c1"] == 1


def _random_kills(live: Live, command: str, wanted: dict[str, int], seed: int) -> bool:
    """Kill ``command --wait`` at a random moment (inside imports, a write, or a wait); True if it was alive."""
    delay = random.Random(seed).uniform(0.7, 1.6)  # start-up alone takes ~0.9 s
    child = spawn_cli(live.args(command, "c1", "--wait"), live.env, live.tmp)
    time.sleep(delay)
    alive = child.poll() is None
    child.send_signal(signal.SIGKILL)
    child.communicate()
    _recovered(live, wanted)
    assert live.tally.sent["c1"] == 1
    return alive


@pytest.mark.parametrize("seed", [1, 2])
def test_stop_killed_at_a_random_moment_converges(stop_live: Live, seed: int) -> None:
    _random_kills(stop_live, "stop", STOPPED, seed)


@pytest.mark.parametrize("seed", [3, 4])
def test_start_killed_at_a_random_moment_converges(start_live: Live, seed: int) -> None:
    _stopped_by_hand(start_live)
    _random_kills(start_live, "start", SIZES, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10, 30))
def test_many_random_kills_converge(tmp_path: Path, seed: int) -> None:
    action = "stop" if seed % 2 else "start"
    for live in live_cluster(tmp_path, action, seed=seed):
        if action == "start":
            _stopped_by_hand(live)
        _random_kills(live, action, STOPPED if action == "stop" else SIZES, seed)
