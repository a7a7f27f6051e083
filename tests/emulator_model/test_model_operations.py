"""ListClusterOperations / DescribeClusterOperation, OperationId on events, and deep health checks."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from hyperpod_scheduler.emulator.capacity import CapacityModel
from hyperpod_scheduler.emulator.errors import EmulatorError
from tests.emulator_model.helpers import (
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
CHECKS = ["InstanceStress", "InstanceConnectivity"]


def ops(b: Any, name: str = "demo", **params: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    token = None
    while True:
        more = {"NextToken": token} if token else {}
        page = b.dispatch("ListClusterOperations", {"ClusterName": name, **params, **more})
        out.extend(page["ClusterOperationSummaries"])
        token = page.get("NextToken")
        if not token:
            return out


def detail(b: Any, op: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = b.dispatch(
        "DescribeClusterOperation", {"ClusterName": "demo", "OperationId": op["OperationId"]}
    )
    return answer


def _running(b: Any, group: str, n: int) -> None:
    run_until(
        b,
        lambda: (
            describe(b)["ClusterStatus"] == "InService"
            and groups(b)[group]["CurrentCount"] == n
            and groups(b)[group]["Status"] == "InService"
        ),
    )


def test_an_update_is_a_scaling_operation_with_counts_before_and_asked_for() -> None:
    b = backend(seed=1)
    b.dispatch("CreateCluster", cluster_request(continuous=True, workers=2))
    _running(b, "gpu", 2)
    [create] = ops(b)
    assert (create["Type"], create["Status"]) == ("Scaling", "Done")
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(describe(b), {"gpu": 4})})
    newest = ops(b)[0]  # newest first by default
    assert (newest["Type"], newest["Status"]) == ("Scaling", "InProgress")
    assert groups(b)["gpu"]["ActiveOperations"] == {"Scaling": 1}
    assert "ActiveOperations" not in groups(b)["controller"]
    scaling = detail(b, newest)["ScalingDetails"]
    assert scaling == [
        {
            "InstanceGroupName": "gpu",
            "Status": "InProgress",
            "Original": {"CurrentCount": 2, "TargetCount": 2, "MinCount": 0},
            "Desired": {"TargetCount": 4, "MinCount": 0},
        }
    ]
    _running(b, "gpu", 4)
    assert detail(b, newest)["Status"] == "Done"
    assert "ActiveOperations" not in groups(b)["gpu"]


def test_a_later_request_on_the_same_group_supersedes_the_earlier_one() -> None:
    b = backend({"instance_types": {P5: 3}}, seed=2)
    b.dispatch("CreateCluster", cluster_request(continuous=True, workers=1, worker_type=P5))
    _running(b, "gpu", 1)
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(describe(b), {"gpu": 5})})
    clock(b).advance(3600)  # the pool has 3: the group stays short and the operation in progress
    first = ops(b)[0]
    assert first["Status"] == "InProgress"
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(describe(b), {"gpu": 3})})
    assert detail(b, first)["Status"] == "Superseded"
    assert [o["Status"] for o in ops(b, Status="Superseded")] == ["Superseded"]
    second = ops(b)[0]
    _running(b, "gpu", 3)
    assert detail(b, second)["Status"] == "Done"


def test_batch_add_and_delete_are_scaling_operations_too() -> None:
    b = backend(seed=3)
    b.dispatch("CreateCluster", cluster_request(continuous=True, workers=1))
    _running(b, "gpu", 1)
    b.dispatch(
        "BatchAddClusterNodes",
        {"ClusterName": "demo", "NodesToAdd": [{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 2}]},
    )
    added = detail(b, ops(b)[0])["ScalingDetails"][0]
    assert (added["Original"]["TargetCount"], added["Desired"]["TargetCount"]) == (1, 3)
    _running(b, "gpu", 3)
    worker = next(n["InstanceId"] for n in nodes(b) if n["InstanceGroupName"] == "gpu")
    b.dispatch("BatchDeleteClusterNodes", {"ClusterName": "demo", "NodeIds": [worker]})
    deleted = detail(b, ops(b)[0])["ScalingDetails"][0]
    assert (deleted["Original"]["TargetCount"], deleted["Desired"]["TargetCount"]) == (3, 2)
    assert len(ops(b, Type="Scaling")) == 3


def test_events_carry_the_operation_and_can_be_filtered_by_it() -> None:
    b = backend(seed=4)
    b.dispatch("CreateCluster", cluster_request(continuous=True, workers=1))
    _running(b, "gpu", 1)
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(describe(b), {"gpu": 2})})
    _running(b, "gpu", 2)
    op = ops(b)[0]["OperationId"]
    mine = events(b, OperationId=op)
    assert mine and all(e["OperationId"] == op for e in mine)
    assert any(e["Description"].startswith("Launching a new") for e in mine)
    assert len(mine) < len(events(b))  # the create's events belong to another operation


def test_filters_sorting_and_pages() -> None:
    b = backend(seed=5)
    b.dispatch("CreateCluster", cluster_request(continuous=True, workers=1))
    _running(b, "gpu", 1)
    for count in (2, 1, 2):
        b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(describe(b), {"gpu": count})})
        _running(b, "gpu", count)
        clock(b).advance(60)
    everything = ops(b, MaxResults=1)
    assert len(everything) == 4
    times = [o["CreationTime"] for o in everything]
    assert times == sorted(times, reverse=True)
    ascending = ops(b, SortOrder="Ascending")
    assert [o["OperationId"] for o in ascending] == [o["OperationId"] for o in reversed(everything)]
    later = ops(b, CreationTimeAfter=times[-1])
    assert len(later) == 3
    with pytest.raises(EmulatorError) as err:
        b.dispatch(
            "DescribeClusterOperation", {"ClusterName": "demo", "OperationId": "01234567-89ab-cdef-0123-456789abcdef"}
        )
    assert err.value.code == "ResourceNotFound"


def test_operations_older_than_14_days_are_forgotten() -> None:
    b = backend(seed=6)
    b.dispatch("CreateCluster", cluster_request(continuous=True, workers=1))
    _running(b, "gpu", 1)
    clock(b).advance(timedelta(days=15).total_seconds())
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(describe(b), {"gpu": 2})})
    assert len(ops(b)) == 1


def test_default_mode_updates_are_operations_and_a_rollback_ends_them() -> None:
    b = backend({"instance_types": {P5: 2}}, seed=7)
    b.dispatch("CreateCluster", cluster_request(workers=2, worker_type=P5))
    d = wait_status(b, "InService")
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(d, {"gpu": 4})})
    assert ops(b)[0]["Status"] == "InProgress"
    wait_status(b, "RollingBack")
    wait_status(b, "InService")
    assert ops(b)[0]["Status"] == "Done"
    assert groups(b)["gpu"]["TargetCount"] == 2


# --- deep health checks ------------------------------------------------------------------------------


def _checked(seed: int = 8, **capacity: Any) -> Any:
    b = backend({"timing": {"deep_health_check": 1800, **capacity}}, seed=seed)
    b.dispatch("CreateCluster", cluster_request(continuous=True, workers=2, OnStartDeepHealthChecks=CHECKS))
    return b


def _checking(b: Any) -> bool:
    return any(n["InstanceStatus"]["Status"] == "DeepHealthCheckInProgress" for n in nodes(b))


def test_new_nodes_run_their_deep_health_checks_as_an_operation() -> None:
    b = _checked()
    run_until(b, lambda: _checking(b))
    [check] = ops(b, Type="DeepHealthCheck")
    assert check["Status"] == "InProgress"
    details = detail(b, check)["DeepHealthCheckDetails"]
    assert [(d["InstanceGroupName"], d["DeepHealthChecks"]) for d in details] == [("gpu", CHECKS)]
    checking = {n["InstanceId"] for n in nodes(b) if n["InstanceStatus"]["Status"] == "DeepHealthCheckInProgress"}
    assert checking <= set(details[0]["InstanceIds"])
    assert all(e["OperationId"] == check["OperationId"] for e in events(b, OperationId=check["OperationId"]))
    _running(b, "gpu", 2)
    assert all(o["Status"] == "Done" for o in ops(b, Type="DeepHealthCheck"))


def test_an_update_is_refused_while_deep_health_checks_run_and_accepted_after() -> None:
    b = _checked()
    wait_status(b, "InService")
    run_until(b, lambda: _checking(b))
    with pytest.raises(EmulatorError) as err:
        b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(describe(b), {"gpu": 3})})
    assert err.value.code == "ConflictException"
    assert "deep health checks are in progress" in err.value.message and "gpu" in err.value.message
    run_until(b, lambda: not _checking(b))
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(describe(b), {"gpu": 3})})


def _check_seconds(instance_type: str, seed: int, timing: dict[str, Any] | None = None) -> list[float]:
    from hyperpod_scheduler.emulator.model_nodes import plan_phases
    from hyperpod_scheduler.emulator.model_world import World

    model = CapacityModel.from_dict({"timing": timing} if timing else {})
    w = World(model, seed, clock(backend()).now())
    out = []
    for _ in range(40):
        phases, _ = plan_phases(w, {"OnStartDeepHealthChecks": CHECKS}, instance_type)
        out.extend(seconds for name, seconds in phases if name == "deep-health-check")
    return out


def test_health_check_time_depends_on_the_family_and_spreads() -> None:
    p5, c5 = _check_seconds(P5, 1), _check_seconds("ml.c5.xlarge", 1)
    assert min(p5) > max(c5)  # an 8-GPU host's DCGM and NCCL checks take longer than a CPU node's
    assert len(set(p5)) == len(p5)  # drawn with spread, not one fixed figure
    fixed = _check_seconds(P5, 1, {"deep_health_check": {"ml.p5*": [100, 100]}})
    assert set(fixed) == {100.0}
    assert set(_check_seconds("ml.g5.xlarge", 1, {"deep_health_check": {"ml.p5*": 100}})) != {100.0}
