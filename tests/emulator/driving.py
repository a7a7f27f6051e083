"""Moving the emulator's virtual clock until something a client can see has happened."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from hyperpod_scheduler.emulator import Emulator

# Long enough for any modelled phase chain (the three-hour MinInstanceCount rollback included).
HORIZON = timedelta(hours=6)


def run_until(emu: Emulator, done: Callable[[], bool], horizon: timedelta = HORIZON) -> None:
    """Jump the virtual clock from scheduled event to scheduled event until ``done()`` holds.

    ``done`` asks through boto3, so the condition is what a client would observe.
    """
    deadline = emu.clock.now() + horizon
    for _ in range(10_000):
        if done():
            return
        nxt = emu.backend.next_event_time()
        now = emu.clock.now()
        assert nxt is not None, "nothing is scheduled and the condition does not hold"
        assert nxt <= deadline, f"condition still false after {horizon} of emulated time"
        emu.advance(max((nxt - now).total_seconds(), 0.0))
    raise AssertionError("the emulator keeps scheduling events without reaching the condition")


def status_is(sm: Any, name: str, *statuses: str) -> Callable[[], bool]:
    return lambda: sm.describe_cluster(ClusterName=name)["ClusterStatus"] in statuses


def wait_status(emu: Emulator, sm: Any, name: str, *statuses: str) -> dict[str, Any]:
    run_until(emu, status_is(sm, name, *statuses))
    described: dict[str, Any] = sm.describe_cluster(ClusterName=name)
    return described


def groups_by_name(described: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["InstanceGroupName"]: g for g in described["InstanceGroups"]}
