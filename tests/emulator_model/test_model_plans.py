"""Training plans: reserved blocks that go Scheduled -> Active -> Expired on the clock, and the groups on them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from hyperpod_scheduler.emulator.capacity import CapacityModel
from hyperpod_scheduler.emulator.errors import EmulatorError
from hyperpod_scheduler.errors import UsageError
from tests.emulator_model.helpers import (
    T0,
    backend,
    clock,
    cluster_request,
    events,
    groups,
    nodes,
    run_until,
    wait_status,
)

P5 = "ml.p5.48xlarge"
ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-block"
# The shared pool has no P5 at all: whatever a plan group runs comes from its reservation.
CAPACITY: dict[str, Any] = {
    "instance_types": {P5: 0},
    "training_plans": {"p5-block": {"instance_type": P5, "count": 3, "start": "+2h", "duration_hours": 24}},
}


def _plan(b: Any) -> dict[str, Any]:
    answer: dict[str, Any] = b.dispatch("DescribeTrainingPlan", {"TrainingPlanName": "p5-block"})
    return answer


def _on_plan(workers: int = 4, continuous: bool = True) -> dict[str, Any]:
    return cluster_request(continuous=continuous, workers=workers, worker_type=P5, TrainingPlanArn=ARN)


def test_a_plan_goes_scheduled_active_expired_on_the_clock() -> None:
    b = backend(CAPACITY)
    plan = _plan(b)
    assert (plan["Status"], plan["TotalInstanceCount"], plan["AvailableInstanceCount"]) == ("Scheduled", 3, 0)
    assert plan["StartTime"] == T0 + timedelta(hours=2) and plan["EndTime"] == T0 + timedelta(hours=26)
    assert (plan["DurationHours"], plan["DurationMinutes"]) == (24, 0)
    [block] = plan["ReservedCapacitySummaries"]
    assert (block["InstanceType"], block["TotalInstanceCount"], block["Status"]) == (P5, 3, "Scheduled")
    clock(b).advance(2 * 3600)
    assert (_plan(b)["Status"], _plan(b)["AvailableInstanceCount"]) == ("Active", 3)
    clock(b).advance(24 * 3600)
    assert _plan(b)["Status"] == "Expired"
    assert b.dispatch("DescribeTrainingPlan", {"TrainingPlanName": ARN})["TrainingPlanArn"] == ARN


def test_a_group_uses_only_its_plans_instances_while_the_plan_is_active_and_loses_them_at_its_end() -> None:
    b = backend(CAPACITY, seed=3)
    b.dispatch("CreateCluster", _on_plan(workers=4))
    wait_status(b, "InService")
    clock(b).advance(3600)
    assert groups(b)["gpu"]["CurrentCount"] == 0  # Scheduled: nothing to launch into
    assert groups(b)["gpu"]["TrainingPlanStatus"] == "Scheduled"
    assert any("Training plan p5-block is Scheduled" in e["Description"] for e in events(b, InstanceGroupName="gpu"))
    run_until(b, lambda: groups(b)["gpu"]["CurrentCount"] == 3)  # the block holds 3, the group wants 4
    assert groups(b)["gpu"]["TrainingPlanStatus"] == "Active"
    plan = _plan(b)
    assert (plan["InUseInstanceCount"], plan["AvailableInstanceCount"]) == (3, 0)
    assert b.usage().get(P5, 0) == 0  # the shared pool was never touched
    clock(b).set(T0 + timedelta(hours=26))  # the block ends
    b.process_due()
    assert all(n["InstanceStatus"]["Status"] == "ShuttingDown" for n in nodes(b) if n["InstanceGroupName"] == "gpu")
    run_until(b, lambda: not [n for n in nodes(b) if n["InstanceGroupName"] == "gpu"])
    gpu = groups(b)["gpu"]
    assert (gpu["CurrentCount"], gpu["TargetCount"], gpu["TrainingPlanStatus"]) == (0, 4, "Expired")
    assert _plan(b)["InUseInstanceCount"] == 0


def test_default_mode_cannot_create_a_plan_group_before_the_plan_starts() -> None:
    b = backend(CAPACITY, seed=4)
    b.dispatch("CreateCluster", _on_plan(workers=2, continuous=False))
    failed = wait_status(b, "Failed")
    assert "sufficient capacity" in failed["FailureMessage"]
    clock(b).advance(2 * 3600)
    b.dispatch("CreateCluster", _on_plan(workers=2, continuous=False) | {"ClusterName": "later"})
    wait_status(b, "InService", "later")
    assert groups(b, "later")["gpu"]["CurrentCount"] == 2


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"TrainingPlanArn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/no-such-plan"}, "not found"),
        ({"InstanceType": "ml.p4d.24xlarge"}, "reserves ml.p5.48xlarge, not ml.p4d.24xlarge"),
    ],
)
def test_a_plan_that_does_not_exist_or_does_not_fit_is_refused(change: dict[str, str], needle: str) -> None:
    b = backend(CAPACITY)
    request = _on_plan()
    request["InstanceGroups"][1].update(change)
    with pytest.raises(EmulatorError) as err:
        b.dispatch("CreateCluster", request)
    assert err.value.code == "ValidationException" and needle in err.value.message


def test_an_expired_plan_cannot_be_given_to_a_new_group() -> None:
    b = backend(CAPACITY)
    clock(b).advance(30 * 3600)
    with pytest.raises(EmulatorError, match="has expired"):
        b.dispatch("CreateCluster", _on_plan())


def test_list_training_plans_filters_and_sorts() -> None:
    b = backend(CAPACITY)
    b.add_training_plan("trn-now", {"instance_type": "ml.trn2.48xlarge", "count": 2, "start": "+0s", "end": "+1d"})
    listed = b.dispatch("ListTrainingPlans", {})["TrainingPlanSummaries"]
    assert [p["TrainingPlanName"] for p in listed] == ["trn-now", "p5-block"]  # by start time
    active = b.dispatch("ListTrainingPlans", {"Filters": [{"Name": "Status", "Value": "Active"}]})
    assert [p["TrainingPlanName"] for p in active["TrainingPlanSummaries"]] == ["trn-now"]
    named = b.dispatch("ListTrainingPlans", {"SortBy": "TrainingPlanName", "SortOrder": "Descending", "MaxResults": 1})
    assert [p["TrainingPlanName"] for p in named["TrainingPlanSummaries"]] == ["trn-now"] and named["NextToken"]
    assert b.dispatch("ListTrainingPlans", {}, region="eu-west-1")["TrainingPlanSummaries"] == []
    with pytest.raises(EmulatorError) as err:
        b.dispatch("DescribeTrainingPlan", {"TrainingPlanName": "nope"})
    assert err.value.code == "ResourceNotFound"


def test_a_plan_with_several_blocks_is_active_while_any_block_is() -> None:
    blocks = [
        {"instance_type": P5, "count": 2, "start": "+0s", "duration_hours": 1},
        {"instance_type": P5, "count": 4, "start": "+3h", "duration_hours": 1},
    ]
    b = backend({"training_plans": {"two": {"blocks": blocks}}})
    status = lambda: b.dispatch("DescribeTrainingPlan", {"TrainingPlanName": "two"})["Status"]  # noqa: E731
    assert status() == "Active"
    clock(b).advance(2 * 3600)
    assert status() == "Scheduled"
    clock(b).advance(2 * 3600)
    assert status() == "Expired"


@pytest.mark.parametrize(
    ("plans", "needle"),
    [
        ({"x": {"instance_type": "ml.c5.xlarge", "count": 1, "start": "+0s", "end": "+1h"}}, "x.instance_type"),
        ({"x": {"instance_type": P5, "count": 0, "start": "+0s", "end": "+1h"}}, "x.count"),
        ({"x": {"instance_type": P5, "count": 1, "start": "+2h", "end": "+1h"}}, "must end after it starts"),
        ({"x": {"instance_type": P5, "count": 1, "start": "+0s"}}, "needs end or duration_hours"),
        ({"x": {"instance_type": P5, "count": 1, "start": "soon", "end": "+1h"}}, "x.start"),
        ({"bad name": {"instance_type": P5, "count": 1, "start": "+0s", "end": "+1h"}}, "not a training plan name"),
        ({"x": {"instance_type": P5, "count": 1, "start": "+0s", "end": "+1h", "size": 3}}, "x.size: unknown key"),
    ],
)
def test_bad_plans_in_the_capacity_file_are_one_line_errors(plans: dict[str, Any], needle: str) -> None:
    with pytest.raises(UsageError) as err:
        CapacityModel.from_dict({"training_plans": plans})
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_plans_added_at_run_time_survive_a_restart(tmp_path: Any) -> None:
    from hyperpod_scheduler.emulator.clock import VirtualClock
    from tests.emulator_model.helpers import CheckedBackend

    state = tmp_path / "s.sqlite"
    b = backend(state_path=state)
    b.add_training_plan("kept", {"instance_type": P5, "count": 1, "start": "+1h", "duration_hours": 2})
    b.release_image("1.5.0")
    b.close()
    again = CheckedBackend(VirtualClock(T0), state_path=state)
    assert again.dispatch("DescribeTrainingPlan", {"TrainingPlanName": "kept"})["StartTime"] == T0 + timedelta(hours=1)
    assert again.latest_image() == "1.5.0"
