"""A fleet under emulator faults (30% throttling, 10% HTTP 500, latency, conflicts while updating, a
capacity shortfall at the morning start) converges within a bounded number of ticks and loses nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.reliability.fleet_sim import MONDAY_6AM, FleetRun, Interloper, instant_retries
from tests.reliability.harness import UpdateTally, small_request

SIZES = {"controller": 1, "cpu": 2}
STOPPED = {"controller": 0, "cpu": 0}
TICK = timedelta(minutes=10)
# With 40% of requests failing, botocore's retry quota runs dry and some ticks end in an error for a
# cluster; the next tick takes it up again. Two hours of 10-minute ticks bound any one transition.
BOUND = 12
# At 08:00 the region holds 14 ml.c5.xlarge for a fleet that needs 2 per cluster; plenty from 09:30.
SHORT_MORNING = {
    "instance_types": {
        "ml.c5.xlarge": {
            "daily": [
                {"time": "00:00", "available": 1000},
                {"time": "08:00", "available": 14},
                {"time": "09:30", "available": 1000},
            ]
        }
    }
}
FAULTS = {"throttle_rate": 0.3, "error_rate": 0.1, "latency_ms": 1}


@pytest.fixture
def faulty() -> Iterator[Emulator]:
    with (
        instant_retries(),
        running_emulator(virtual_start=MONDAY_6AM, seed=21, capacity=SHORT_MORNING, in_process=True) as emu,
    ):
        yield emu


def _fleet(emu: Emulator, n: int) -> tuple[FleetRun, UpdateTally, Interloper]:
    names = [f"team-{i:02d}" for i in range(n)]
    for name in names:
        emu.backend.dispatch("CreateCluster", small_request(name))
    emu.advance(1800)  # all in service before the faults start
    interloper = Interloper(emu, rate=0.2, seed=5)
    tally = UpdateTally(emu)
    emu.faults = {**FAULTS, "seed": 9}
    return FleetRun(emu, names, "Mon-Fri 08:00-18:00 UTC", tally=tally), tally, interloper


def _ticks_until(run: FleetRun, wanted: dict[str, int], limit: int) -> int:
    """Tick every 10 virtual minutes until every cluster is settled at ``wanted``; how many ticks it took."""
    for n in range(1, limit + 1):
        run.tick()
        if all(run.at(name, wanted) for name in run.names):
            return n
        run.emu.advance(TICK.total_seconds())
    pending = [name for name in run.names if not run.at(name, wanted)]
    raise AssertionError(f"not at {wanted} after {limit} ticks: {pending}")


def _advance_to(run: FleetRun, hour: int, day: int = 0) -> None:
    target = MONDAY_6AM.replace(hour=hour) + timedelta(days=day)
    while run.emu.clock.now() < target:
        run.tick()  # quiet ticks in between, as cron would run them
        run.emu.advance(min(TICK.total_seconds(), (target - run.emu.clock.now()).total_seconds()))


def _check_day(run: FleetRun, tally: UpdateTally, interloper: Interloper, day: int = 0) -> dict[str, int]:
    taken = {}
    if day == 0:
        taken["first stop"] = _ticks_until(run, STOPPED, limit=BOUND)
    _advance_to(run, 8, day)
    taken["start"] = _ticks_until(run, SIZES, limit=BOUND + 9)  # + 90 min short of capacity
    _advance_to(run, 18, day)
    taken["stop"] = _ticks_until(run, STOPPED, limit=BOUND)
    for name in run.names:
        assert run.recorded(name) == SIZES, f"{name}: recorded sizes lost"
    return taken


def test_fleet_converges_under_faults(faulty: Emulator) -> None:
    run, tally, interloper = _fleet(faulty, 12)
    taken = _check_day(run, tally, interloper)
    print(f"ticks to converge: {taken}")
    # Each transition reached the model once per cluster, except where the model refused it (someone
    # else was updating) or rolled it back (no capacity): those are retried, never doubled.
    for name in run.names:
        assert tally.accepted[name] == 3 + run.failed(name), (name, tally.accepted[name], run.failed(name))
        assert tally.sent[name] == tally.accepted[name] + tally.refused[name]
    # The faults really happened: some conflicts and some capacity rollbacks.
    assert sum(tally.refused.values()) > 0
    assert sum(run.failed(n) for n in run.names) > 0
    assert not [
        r
        for r in run.results
        if r.kind not in ("quiet", "sent", "in-progress", "settled", "failed", "skip", "noop", "error")
    ]


@pytest.mark.slow
def test_twenty_clusters_converge_all_week(faulty: Emulator) -> None:
    run, tally, interloper = _fleet(faulty, 20)
    for day in range(5):
        _check_day(run, tally, interloper, day)
    for name in run.names:
        assert tally.accepted[name] == 1 + 2 * 5 + run.failed(name)
