"""Capacity: the YAML model, shortage in both provisioning modes, injected failures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hyperpod_scheduler.emulator.capacity import CapacityModel
from hyperpod_scheduler.errors import UsageError
from tests.emulator_model.helpers import (
    CAPACITY_FAILURE,
    T0,
    backend,
    clock,
    cluster_request,
    describe,
    events,
    groups,
    resend,
    run_until,
    statuses_seen,
    wait_status,
)

P5 = "ml.p5.48xlarge"


def test_capacity_file_steps_daily_pattern_and_defaults(tmp_path: Path) -> None:
    path = tmp_path / "capacity.yaml"
    path.write_text(
        """
instance_types:
  ml.p5.48xlarge:
    available: 2
    schedule:
      - {at: "+2h", available: 6}
      - {at: "2026-12-03T00:00:00Z", available: 0}
  "ml.g5.*":
    daily:
      - {time: "08:00", available: 1}
      - {time: "20:00", available: 10}
failures:
  fail_next_launches: {ml.trn1.32xlarge: 2}
  lifecycle_script_failure_rate: 0.25
timing:
  provisioning: [60, 90]
""",
        encoding="utf-8",
    )
    model = CapacityModel.from_yaml(path)
    origin = T0
    assert model.available(P5, T0, origin) == 2
    assert model.available(P5, T0 + timedelta(hours=2), origin) == 6
    assert model.available(P5, datetime(2026, 12, 3, 1, tzinfo=UTC), origin) == 0
    assert model.available("ml.g5.xlarge", T0.replace(hour=12), origin) == 1
    assert model.available("ml.g5.xlarge", T0.replace(hour=21), origin) == 10
    assert model.available("ml.g5.xlarge", T0.replace(hour=3), origin) == 10  # wraps from the day before
    assert model.available("ml.c5.xlarge", T0, origin) == 1000  # built-in default: plentiful CPU
    assert model.available("ml.p5e.48xlarge", T0, origin) == 8  # built-in default: scarce P5 class
    assert model.fail_next_launches == {"ml.trn1.32xlarge": 2}
    assert model.lifecycle_script_failure_rate == 0.25
    assert model.timing.provisioning == (60.0, 90.0)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"instance_types": {P5: -1}}, "instance_types.ml.p5.48xlarge"),
        ({"instance_types": {P5: {"avail": 3}}}, "instance_types.ml.p5.48xlarge.avail"),
        ({"instance_types": {P5: {"schedule": [{"at": "tomorrow", "available": 1}]}}}, "schedule[0].at"),
        ({"instance_types": {P5: {"daily": [{"time": "25:00", "available": 1}]}}}, "daily[0].time"),
        ({"failures": {"lifecycle_script_failure_rate": 2}}, "lifecycle_script_failure_rate"),
        ({"timing": {"provisioning": [10, 5]}}, "timing.provisioning"),
        ({"timing": {"warp": 1}}, "timing.warp"),
        ({"pools": {}}, "capacity.pools"),
    ],
)
def test_bad_capacity_input_names_the_field(data: dict[str, object], needle: str) -> None:
    with pytest.raises(UsageError) as err:
        CapacityModel.from_dict(data)
    assert needle in str(err.value)


def test_unreadable_capacity_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"missing\.yaml"):
        CapacityModel.from_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("instance_types: [", encoding="utf-8")
    with pytest.raises(UsageError, match="not valid YAML"):
        CapacityModel.from_yaml(bad)


def test_all_or_nothing_create_without_capacity_rolls_back_to_failed() -> None:
    b = backend(seed=1, capacity={"instance_types": {P5: 3}})
    b.dispatch("CreateCluster", cluster_request(workers=4, worker_type=P5))
    assert statuses_seen(b, "Failed") == ["Creating", "RollingBack", "Failed"]
    d = describe(b)
    assert d["FailureMessage"] == CAPACITY_FAILURE
    assert all(g["CurrentCount"] == 0 for g in d["InstanceGroups"])
    run_until(b, lambda: b.usage() == {})


def test_all_or_nothing_update_rolls_back_to_the_previous_state() -> None:
    b = backend(seed=1, capacity={"instance_types": {P5: 3}})
    b.dispatch("CreateCluster", cluster_request(workers=2, worker_type=P5))
    before = wait_status(b, "InService")
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(before, {"gpu": 5})})
    assert statuses_seen(b, "InService") == ["Updating", "RollingBack", "InService"]
    after = describe(b)
    assert after["FailureMessage"] == CAPACITY_FAILURE
    assert after["InstanceGroups"] == before["InstanceGroups"]
    assert b.usage()[P5] == 2
    # A later successful update clears the message.
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(after, {"gpu": 3})})
    assert "FailureMessage" not in wait_status(b, "InService")


def test_capacity_is_shared_across_clusters() -> None:
    b = backend(seed=1, capacity={"instance_types": {P5: 4}})
    b.dispatch("CreateCluster", cluster_request("one", workers=3, worker_type=P5))
    wait_status(b, "InService", "one")
    b.dispatch("CreateCluster", cluster_request("two", workers=2, worker_type=P5))
    assert wait_status(b, "Failed", "two")["FailureMessage"] == CAPACITY_FAILURE


def test_continuous_mode_runs_partially_then_catches_up_when_capacity_returns() -> None:
    capacity = {"instance_types": {P5: {"available": 2, "schedule": [{"at": "+2h", "available": 8}]}}}
    b = backend(seed=2, capacity=capacity)
    b.dispatch("CreateCluster", cluster_request(continuous=True, workers=5, worker_type=P5))
    wait_status(b, "InService")
    run_until(b, lambda: groups(b)["gpu"]["CurrentCount"] == 2)
    clock(b).advance(3600)
    gpu = groups(b)["gpu"]
    assert (gpu["CurrentCount"], gpu["TargetCount"], gpu["Status"]) == (2, 5, "InService")
    warns = [e for e in events(b, ResourceType="InstanceGroup") if e["EventLevel"] == "Warn"]
    assert warns and warns[0]["Description"] == (
        "We currently do not have sufficient capacity to launch new ml.p5.48xlarge instances. Please try again."
    )
    run_until(b, lambda: groups(b)["gpu"]["CurrentCount"] == 5)
    assert b.clock.now() >= T0 + timedelta(hours=2)
    assert b.usage()[P5] == 5
    assert describe(b)["ClusterStatus"] == "InService"


def test_continuous_controller_without_capacity_fails_the_cluster() -> None:
    b = backend(seed=2, capacity={"instance_types": {"ml.m5.xlarge": 0}})
    b.dispatch("CreateCluster", cluster_request(continuous=True))
    d = wait_status(b, "Failed")
    assert d["FailureMessage"] == CAPACITY_FAILURE


def test_injected_launch_failures_are_consumed_one_by_one() -> None:
    b = backend(seed=3, capacity={"failures": {"fail_next_launches": {P5: 1}}})
    b.dispatch("CreateCluster", cluster_request("first", workers=1, worker_type=P5))
    assert wait_status(b, "Failed", "first")["FailureMessage"] == CAPACITY_FAILURE
    b.dispatch("CreateCluster", cluster_request("second", workers=1, worker_type=P5))
    wait_status(b, "InService", "second")


def test_lifecycle_script_failures() -> None:
    b = backend(seed=4, capacity={"failures": {"lifecycle_script_failure_rate": 1.0}})
    b.dispatch("CreateCluster", cluster_request(tier="custom"))
    d = wait_status(b, "Failed")
    assert "Lifecycle scripts did not run successfully" in d["FailureMessage"]
    # A Continuous cluster's events name the failure (Default mode has no events on AWS).
    b.dispatch("CreateCluster", cluster_request("cont", tier="custom", continuous=True))
    wait_status(b, "Failed", "cont")
    assert any(e["EventLevel"] == "Error" for e in events(b, "cont", ResourceType="Instance"))
    # AMI-based nodes run no script of ours, so the same rate cannot fail them.
    b.dispatch("CreateCluster", cluster_request("ami", tier="ami"))
    wait_status(b, "InService", "ami")


def test_set_capacity_swaps_the_pool_at_run_time() -> None:
    b = backend(seed=5, capacity={"instance_types": {P5: 0}})
    b.dispatch("CreateCluster", cluster_request(continuous=True, workers=2, worker_type=P5))
    wait_status(b, "InService")
    clock(b).advance(1800)
    assert groups(b)["gpu"]["CurrentCount"] == 0
    b.set_capacity(CapacityModel.from_dict({"instance_types": {P5: 2}}))
    run_until(b, lambda: groups(b)["gpu"]["CurrentCount"] == 2)


def test_account_quota_gives_resource_limit_exceeded() -> None:
    from hyperpod_scheduler.emulator.errors import EmulatorError

    b = backend(capacity={"instance_types": {P5: {"available": 100, "quota": 4}}})
    with pytest.raises(EmulatorError) as err:
        b.dispatch("CreateCluster", cluster_request(workers=5, worker_type=P5))
    assert err.value.code == "ResourceLimitExceeded"
    assert "'ml.p5.48xlarge for cluster usage' is 4 Instances" in err.value.message
