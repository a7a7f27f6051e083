"""Continuous mode: the MinInstanceCount rollback, BatchAddClusterNodes and BatchDeleteClusterNodes."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hyperpod_scheduler.emulator.backend import HyperPodBackend
from hyperpod_scheduler.emulator.errors import EmulatorError
from tests.emulator_model.helpers import (
    T0,
    backend,
    clock,
    cluster_request,
    describe,
    events,
    group,
    groups,
    nodes,
    resend,
    run_until,
    wait_status,
)

P5 = "ml.p5.48xlarge"


def _continuous(p5: int = 8, workers: int = 2) -> HyperPodBackend:
    b = backend(seed=9, capacity={"instance_types": {P5: p5}})
    b.dispatch("CreateCluster", cluster_request(continuous=True, workers=workers, worker_type=P5))
    wait_status(b, "InService")
    run_until(b, lambda: groups(b)["gpu"]["Status"] == "InService")
    return b


def test_a_new_group_short_of_its_minimum_for_three_hours_rolls_back_to_zero() -> None:
    b = _continuous(p5=2, workers=2)
    new = group("more", 4, "Compute", P5, MinInstanceCount=2)
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": [new]})
    start = b.clock.now()
    clock(b).advance(3 * 3600 - 60)
    more = groups(b)["more"]
    assert (more["Status"], more["CurrentCount"], more["TargetCount"], more["MinCount"]) == ("Creating", 0, 4, 2)
    run_until(b, lambda: groups(b)["more"]["TargetCount"] == 0)
    assert b.clock.now() == start + timedelta(hours=3)
    more = groups(b)["more"]
    assert (more["Status"], more["TargetCount"], more["MinCount"]) == ("InService", 0, 0)
    errors = [e for e in events(b, InstanceGroupName="more") if e["EventLevel"] == "Error"]
    assert errors and "MinInstanceCount of 2 within 3 hours" in errors[0]["Description"]
    detail = b.dispatch("DescribeClusterEvent", {"ClusterName": "demo", "EventId": errors[0]["EventId"]})
    scaling = detail["EventDetails"]["EventDetails"]["EventMetadata"]["InstanceGroupScaling"]
    assert scaling["MinCount"] == 2 and scaling["TargetCount"] == 4


def test_an_existing_group_rolls_back_to_its_last_in_service_values() -> None:
    b = _continuous(p5=3, workers=2)
    run_until(b, lambda: groups(b)["gpu"]["CurrentCount"] == 2)
    sent = resend(describe(b), {"gpu": 6})
    sent[-1]["MinInstanceCount"] = 5
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": sent})
    run_until(b, lambda: groups(b)["gpu"]["TargetCount"] == 2)
    gpu = groups(b)["gpu"]
    assert (gpu["TargetCount"], gpu["MinCount"], gpu["CurrentCount"]) == (2, 0, 2)
    wait = b.clock.now()
    run_until(b, lambda: b.usage()[P5] == 2)  # the third node, which did launch, is scaled back in
    assert b.clock.now() >= wait


def test_a_minimum_met_in_time_does_not_roll_back() -> None:
    b = _continuous(p5=8, workers=2)
    sent = resend(describe(b), {"gpu": 4})
    sent[-1]["MinInstanceCount"] = 3
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": sent})
    clock(b).advance(4 * 3600)
    gpu = groups(b)["gpu"]
    assert (gpu["TargetCount"], gpu["CurrentCount"], gpu["MinCount"]) == (4, 4, 3)


def _add(group_name: str, n: int) -> dict[str, object]:
    return {"InstanceGroupName": group_name, "IncrementTargetCountBy": n}


def test_batch_add_returns_logical_ids_that_become_nodes() -> None:
    b = _continuous()
    request = {"ClusterName": "demo", "ClientToken": "tok-1", "NodesToAdd": [_add("gpu", 2), _add("nope", 1)]}
    out = b.dispatch("BatchAddClusterNodes", request)
    ids = [s["NodeLogicalId"] for s in out["Successful"]]
    assert len(ids) == 2 and {s["Status"] for s in out["Successful"]} == {"Pending"}
    assert out["Failed"] == [
        {
            "InstanceGroupName": "nope",
            "ErrorCode": "InstanceGroupNotFound",
            "FailedCount": 1,
            "Message": "Instance group nope not found",
        }
    ]
    assert groups(b)["gpu"]["TargetCount"] == 4
    again = b.dispatch("BatchAddClusterNodes", request)
    assert again == out and groups(b)["gpu"]["TargetCount"] == 4  # idempotent within 8 hours
    detail = b.dispatch("DescribeClusterNode", {"ClusterName": "demo", "NodeLogicalId": ids[0]})["NodeDetails"]
    assert detail["NodeLogicalId"] == ids[0]
    run_until(b, lambda: groups(b)["gpu"]["CurrentCount"] == 4)
    listed = {n.get("NodeLogicalId") for n in nodes(b, IncludeNodeLogicalIds=True)}
    assert set(ids) <= listed
    clock(b).advance(9 * 3600)  # the token has expired: the same call adds again
    b.dispatch(
        "BatchAddClusterNodes",
        {
            "ClusterName": "demo",
            "ClientToken": "tok-1",
            "NodesToAdd": [{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 2}],
        },
    )
    assert groups(b)["gpu"]["TargetCount"] == 6


@pytest.mark.parametrize(
    ("nodes_to_add", "needle"),
    [
        ([{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 51}], "IncrementTargetCountBy"),
        (
            [
                {"InstanceGroupName": "gpu", "IncrementTargetCountBy": 30},
                {"InstanceGroupName": "controller", "IncrementTargetCountBy": 21},
            ],
            "at most 50 nodes",
        ),
    ],
)
def test_batch_add_limits(nodes_to_add: list[dict[str, object]], needle: str) -> None:
    b = _continuous()
    with pytest.raises(EmulatorError) as err:
        b.dispatch("BatchAddClusterNodes", {"ClusterName": "demo", "NodesToAdd": nodes_to_add})
    assert err.value.code == "ValidationException" and needle in err.value.message


def test_batch_add_needs_continuous_mode_and_an_in_service_group() -> None:
    b = backend()
    b.dispatch("CreateCluster", cluster_request())
    wait_status(b, "InService")
    with pytest.raises(EmulatorError, match="Continuous"):
        b.dispatch(
            "BatchAddClusterNodes",
            {"ClusterName": "demo", "NodesToAdd": [{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}]},
        )
    c = _continuous()
    c.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": [group("cpu", 2, "Compute")]})
    out = c.dispatch("BatchAddClusterNodes", {"ClusterName": "demo", "NodesToAdd": [_add("cpu", 1)]})
    assert out["Failed"][0]["ErrorCode"] == "InvalidInstanceGroupStatus"


def test_batch_delete_removes_workers_lowers_the_target_and_refuses_controllers() -> None:
    b = _continuous(workers=3)
    run_until(b, lambda: groups(b)["gpu"]["CurrentCount"] == 3)
    listed = nodes(b)
    worker = next(n["InstanceId"] for n in listed if n["InstanceGroupName"] == "gpu")
    controller = next(n["InstanceId"] for n in listed if n["InstanceGroupName"] == "controller")
    out = b.dispatch(
        "BatchDeleteClusterNodes", {"ClusterName": "demo", "NodeIds": [worker, controller, "i-0123456789abcdef0"]}
    )
    assert out["Successful"] == [worker]
    assert {f["NodeId"]: f["Code"] for f in out["Failed"]} == {
        controller: "InvalidNodeStatus",
        "i-0123456789abcdef0": "NodeIdNotFound",
    }
    assert groups(b)["gpu"]["TargetCount"] == 2
    status = b.dispatch("DescribeClusterNode", {"ClusterName": "demo", "NodeId": worker})
    assert status["NodeDetails"]["InstanceStatus"]["Status"] == "ShuttingDown"
    run_until(b, lambda: worker not in {n["InstanceId"] for n in nodes(b)})
    with pytest.raises(EmulatorError) as err:
        b.dispatch("BatchDeleteClusterNodes", {"ClusterName": "demo", "NodeIds": [worker] * 100})
    assert err.value.code == "ValidationException" and "99" in err.value.message


def test_events_filter_and_paginate() -> None:
    b = _continuous()
    everything = events(b, MaxResults=7)
    assert len(everything) == len({e["EventId"] for e in everything}) > 7
    times = [e["EventTime"] for e in everything]
    assert times == sorted(times, reverse=True)  # newest first by default
    assert {e["ResourceType"] for e in events(b, ResourceType="Cluster")} == {"Cluster"}
    assert {e["InstanceGroupName"] for e in events(b, InstanceGroupName="gpu")} == {"gpu"}
    later = events(b, EventTimeAfter=T0 + timedelta(minutes=5))
    assert later and all(e["EventTime"] > T0 + timedelta(minutes=5) for e in later)
    with pytest.raises(EmulatorError) as err:
        b.dispatch("DescribeClusterEvent", {"ClusterName": "demo", "EventId": "00000000-0000-0000-0000-000000000000"})
    assert err.value.code == "ResourceNotFound"


def test_failed_lifecycle_scripts_are_replaced_until_the_group_is_full() -> None:
    b = backend(seed=3, capacity={"failures": {"lifecycle_script_failure_rate": 0.5}})
    request = cluster_request(continuous=True, workers=4, tier="custom")
    request["InstanceGroups"][0].pop("LifeCycleConfig")  # an AMI-based controller, which cannot fail
    b.dispatch("CreateCluster", request)
    seen: set[str] = set()

    def full() -> bool:
        seen.update(n["InstanceStatus"]["Status"] for n in nodes(b))
        return bool(groups(b)["gpu"]["CurrentCount"] == 4)

    run_until(b, full)
    assert "Failure" in seen
    failures = [e for e in events(b, ResourceType="Instance") if e["EventLevel"] == "Error"]
    assert failures and all("Lifecycle script failed" in e["Description"] for e in failures)


def test_the_fallback_is_the_last_accepted_configuration_even_if_never_full() -> None:
    b = _continuous(p5=3, workers=5)  # InService at 3 of 5: short, but its minimum (0) is met
    run_until(b, lambda: groups(b)["gpu"]["CurrentCount"] == 3)
    sent = resend(describe(b), {"gpu": 6})
    sent[-1]["MinInstanceCount"] = 4
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": sent})
    run_until(b, lambda: groups(b)["gpu"]["TargetCount"] != 6)
    gpu = groups(b)["gpu"]
    assert (gpu["TargetCount"], gpu["MinCount"]) == (5, 0)
