"""The state file: a new backend on the same file resumes; the same seed gives the same run."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hyperpod_scheduler.emulator.backend import HyperPodBackend
from hyperpod_scheduler.emulator.capacity import CapacityModel
from hyperpod_scheduler.emulator.clock import RealClock, VirtualClock
from hyperpod_scheduler.errors import UsageError
from tests.emulator_model.helpers import (
    T0,
    CheckedBackend,
    backend,
    clock,
    cluster_request,
    describe,
    events,
    groups,
    nodes,
    resend,
    run_until,
    wait_status,
)

P5 = "ml.p5.48xlarge"


def test_a_restart_resumes_clusters_nodes_events_and_scheduled_changes(tmp_path: Path) -> None:
    state = tmp_path / "emulator.sqlite"
    capacity = {"instance_types": {P5: 3}}
    first = backend(capacity, seed=4, state_path=state)
    first.dispatch(
        "CreateCluster",
        {
            **cluster_request("kept", continuous=True, workers=5, worker_type=P5),
            "Tags": [{"Key": "schedule", "Value": "nights"}],
        },
    )
    wait_status(first, "InService", "kept")
    first.dispatch("CreateCluster", cluster_request("half-way"))
    clock(first).advance(200)  # mid-provisioning
    before = {n: describe(first, n) for n in ("kept", "half-way")}
    before_nodes = nodes(first, "half-way")
    before_events = events(first, "kept")
    usage = first.usage()
    now = first.clock.now()
    first.close()

    second = CheckedBackend(VirtualClock(now), CapacityModel.from_dict(capacity), seed=4, state_path=state)
    assert {n: describe(second, n) for n in ("kept", "half-way")} == before
    assert nodes(second, "half-way") == before_nodes
    assert events(second, "kept") == before_events
    assert second.usage() == usage
    arn = before["kept"]["ClusterArn"]
    assert second.dispatch("ListTags", {"ResourceArn": arn})["Tags"] == [{"Key": "schedule", "Value": "nights"}]
    wait_status(second, "InService", "half-way")  # the scheduled phases carry on after the restart
    gpu = groups(second, "kept")["gpu"]
    assert (gpu["CurrentCount"], gpu["TargetCount"]) == (3, 5)  # and so do the capacity retries


def test_restarted_and_uninterrupted_runs_agree(tmp_path: Path) -> None:
    def run(restart_at: int | None) -> list[Any]:
        state = tmp_path / f"run-{restart_at}.sqlite"
        b = backend({"instance_types": {P5: 2}}, seed=21, state_path=state)
        b.dispatch("CreateCluster", cluster_request(continuous=True, workers=3, worker_type=P5))
        out: list[Any] = []
        for step in range(8):
            if step == restart_at:
                now = b.clock.now()
                b.close()
                b = CheckedBackend(
                    VirtualClock(now), CapacityModel.from_dict({"instance_types": {P5: 2}}), seed=21, state_path=state
                )
            clock(b).advance(300)
            out.append(describe(b))
        out.append(events(b))
        return out

    assert run(None) == run(3)


def test_a_file_that_is_not_sqlite_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "state.sqlite"
    bad.write_text("not a database" * 100, encoding="utf-8")
    with pytest.raises(UsageError, match="state file"):
        HyperPodBackend(VirtualClock(T0), state_path=bad)


def _scenario(seed: int) -> list[Any]:
    b = backend({"instance_types": {P5: 4}, "failures": {"lifecycle_script_failure_rate": 0.2}}, seed=seed)
    b.dispatch("CreateCluster", cluster_request("a", continuous=True, workers=6, worker_type=P5, tier="custom"))
    b.dispatch("CreateCluster", cluster_request("b", workers=2, tier="ami"))  # runs no script: cannot fail
    wait_status(b, "InService", "b")
    b.dispatch("UpdateCluster", {"ClusterName": "b", "InstanceGroups": resend(describe(b, "b"), {"gpu": 0})})
    clock(b).advance(6 * 3600)
    return [describe(b, "a"), describe(b, "b"), nodes(b, "a"), events(b, "a"), nodes(b, "b"), b.usage()]


def test_the_same_seed_gives_the_same_run_and_another_seed_another() -> None:
    assert _scenario(5) == _scenario(5)
    assert _scenario(5) != _scenario(6)


def test_reset_forgets_everything(tmp_path: Path) -> None:
    b = backend(seed=1, state_path=tmp_path / "s.sqlite")
    b.dispatch("CreateCluster", cluster_request())
    b.reset()
    assert b.dispatch("ListClusters", {})["ClusterSummaries"] == []
    assert b.next_event_time() is None and b.usage() == {}
    b.close()
    again = backend(seed=1, state_path=tmp_path / "s.sqlite")
    assert again.dispatch("ListClusters", {})["ClusterSummaries"] == []
    run_until(again, lambda: True)
    assert again.clock.now() - T0 < timedelta(seconds=1)


def _mid_update(state: Path, start: datetime = T0) -> tuple[datetime, str]:
    """A first run that updates a cluster ten days in and stops while the update is in flight."""
    first = CheckedBackend(VirtualClock(start), seed=12, state_path=state)
    first.dispatch("CreateCluster", cluster_request(workers=2))
    wait_status(first, "InService")
    clock(first).advance(10 * 86400)
    first.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(describe(first), {"gpu": 4})})
    clock(first).advance(120)
    assert describe(first)["ClusterStatus"] == "Updating"
    stopped = first.clock.now()
    first.close()
    return stopped, "demo"


def test_a_restart_resumes_the_clock_and_the_update_in_flight_completes(tmp_path: Path) -> None:
    state = tmp_path / "emulator.sqlite"
    stopped, name = _mid_update(state)
    # The new run is told to start ten days earlier: it resumes where the last one stopped instead.
    second = CheckedBackend(VirtualClock(T0), seed=12, state_path=state)
    assert second.clock.now() == stopped
    assert describe(second, name)["ClusterStatus"] == "Updating"
    wait_status(second, "InService", name, horizon=timedelta(hours=2))
    assert groups(second, name)["gpu"]["CurrentCount"] == 4


def test_a_real_time_clock_resumes_from_the_saved_now_too(tmp_path: Path) -> None:
    state = tmp_path / "emulator.sqlite"
    stopped, name = _mid_update(state, datetime.now(UTC))  # ten days ahead of the wall clock
    second = CheckedBackend(RealClock(speed=6000), seed=12, state_path=state)
    assert second.clock.now() >= stopped
    deadline = time.monotonic() + 120  # the update has minutes left: seconds of real time at this speed
    while describe(second, name)["ClusterStatus"] != "InService":
        assert time.monotonic() < deadline, "the update in flight stalled after the restart"
        time.sleep(0.05)
    second.close()


def test_closing_saves_the_clock_even_when_nothing_else_changed(tmp_path: Path) -> None:
    state = tmp_path / "emulator.sqlite"
    first = backend(state_path=state)
    clock(first).advance(3600)
    first.process_due()
    first.close()
    assert CheckedBackend(VirtualClock(T0), state_path=state).clock.now() == T0 + timedelta(hours=1)
    # A later start than the saved one wins: the clock never goes back, and time may pass between runs.
    later = T0 + timedelta(days=2)
    assert CheckedBackend(VirtualClock(later), state_path=state).clock.now() == later
