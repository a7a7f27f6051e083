"""Creating clusters: node phases by lifecycle tier, realistic default timing, both provisioning modes."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

import pytest

from hyperpod_scheduler.emulator.backend import HyperPodBackend
from tests.emulator_model.helpers import (
    T0,
    backend,
    clock,
    cluster_request,
    describe,
    events,
    groups,
    nodes,
    run_until,
    statuses_seen,
    wait_status,
)


@pytest.mark.parametrize("continuous", [False, True])
def test_a_new_ami_based_cluster_is_in_service_in_ten_to_fifteen_minutes(continuous: bool) -> None:
    b = backend(seed=7)
    arn = b.dispatch("CreateCluster", cluster_request(continuous=continuous))["ClusterArn"]
    assert describe(b)["ClusterStatus"] == "Creating"
    seen = statuses_seen(b, "InService")
    assert seen == ["Creating", "InService"]
    took = b.clock.now() - T0
    assert timedelta(minutes=8) <= took <= timedelta(minutes=15), took
    d = describe(b)
    assert d["ClusterArn"] == arn
    assert all(g["CurrentCount"] == g["TargetCount"] for g in d["InstanceGroups"]) or continuous


def _full(b: HyperPodBackend) -> bool:
    return all(g["CurrentCount"] == g["TargetCount"] for g in groups(b).values())


@pytest.mark.parametrize("continuous", [False, True])
def test_tiers_order_the_time_to_in_service_ami_then_extension_then_custom(continuous: bool) -> None:
    took = {}
    for tier in ("ami", "extension", "custom"):
        b = backend(
            seed=1,
            capacity={
                "timing": {"provisioning": 300, "ami_setup": 200, "extension_script": 150, "custom_scripts": 600}
            },
        )
        b.dispatch("CreateCluster", cluster_request(tier=tier, continuous=continuous))
        wait_status(b, "InService")
        run_until(b, partial(_full, b))
        took[tier] = b.clock.now() - T0
    assert took["ami"] < took["extension"] < took["custom"], took


def test_each_phase_of_a_node_is_an_event_and_shows_in_its_status() -> None:
    b = backend(
        seed=2,
        capacity={"timing": {"cluster_setup": 60, "provisioning": 300, "ami_setup": 200, "extension_script": 100}},
    )
    b.dispatch("CreateCluster", cluster_request(tier="extension", workers=1, continuous=True))
    clock(b).advance(61)
    listed = nodes(b)
    assert {n["InstanceStatus"]["Status"] for n in listed} == {"Pending"}
    worker = next(n for n in listed if n["InstanceGroupName"] == "gpu")["InstanceId"]
    run_until(b, lambda: groups(b)["gpu"]["CurrentCount"] == 1)
    texts = [e["Description"] for e in events(b, NodeId=worker, SortOrder="Ascending")]
    assert texts[0].startswith("Launching a new ml.c5.xlarge instance")
    assert [t.split(" on ")[0] for t in texts[1:3]] == [
        "Configuring the node from the HyperPod AMI",
        "Running the OnInitComplete lifecycle script",
    ]
    assert texts[-1] == f"Instance {worker} is running"
    node = b.dispatch("DescribeClusterNode", {"ClusterName": "demo", "NodeId": worker})["NodeDetails"]
    assert node["InstanceStatus"]["Status"] == "Running"
    assert node["LifeCycleConfig"] == {"SourceS3Uri": "s3://sagemaker-demo/lifecycle/", "OnInitComplete": "extend.sh"}
    # Billing starts with lifecycle setup, after provisioning, not at launch.
    assert b.lifecycle_starts("demo")[worker] == node["LaunchTime"] + timedelta(seconds=300)


def test_deep_health_checks_show_their_own_status_before_running() -> None:
    b = backend(
        seed=3,
        capacity={"timing": {"cluster_setup": 0, "provisioning": 10, "ami_setup": 10, "deep_health_check": 1000}},
    )
    b.dispatch("CreateCluster", cluster_request(workers=1, OnStartDeepHealthChecks=["InstanceStress"]))
    clock(b).advance(30)
    b.process_due()
    by_group = {n["InstanceGroupName"]: n["InstanceStatus"]["Status"] for n in nodes(b)}
    assert by_group == {"controller": "Running", "gpu": "DeepHealthCheckInProgress"}
    assert describe(b)["ClusterStatus"] == "Creating"
    clock(b).advance(1000)
    assert describe(b)["ClusterStatus"] == "InService"


def test_node_ids_arns_and_logical_ids_have_the_real_shapes() -> None:
    import re

    b = backend(seed=4)
    arn = b.dispatch("CreateCluster", cluster_request(continuous=True))["ClusterArn"]
    assert re.fullmatch(r"arn:aws:sagemaker:us-east-1:123456789012:cluster/[a-z0-9]{12}", arn)
    wait_status(b, "InService")
    run_until(b, lambda: groups(b)["gpu"]["CurrentCount"] == 2)
    listed = nodes(b, IncludeNodeLogicalIds=True)
    assert all(re.fullmatch(r"i-[0-9a-f]{17}", n["InstanceId"]) for n in listed)
    assert all(n["NodeLogicalId"] for n in listed)
    assert "NodeLogicalId" not in nodes(b)[0]
    assert describe(b, arn)["ClusterName"] == "demo"  # APIs take the ARN as well as the name


def test_continuous_cluster_is_in_service_once_controller_and_login_run() -> None:
    b = backend(
        seed=5, capacity={"timing": {"cluster_setup": 0, "provisioning": 10, "ami_setup": 10, "custom_scripts": 5000}}
    )
    request = cluster_request(continuous=True, login=True, workers=2)
    request["InstanceGroups"][2]["LifeCycleConfig"] = {"SourceS3Uri": "s3://sagemaker-x/", "OnCreate": "slow.sh"}
    b.dispatch("CreateCluster", request)
    d = wait_status(b, "InService")
    by = {g["InstanceGroupName"]: g for g in d["InstanceGroups"]}
    assert by["controller"]["CurrentCount"] == 1 and by["login"]["CurrentCount"] == 1
    assert by["gpu"]["CurrentCount"] == 0 and by["gpu"]["TargetCount"] == 2
    assert by["controller"]["MinCount"] == 1 and by["gpu"]["MinCount"] == 0


def test_default_mode_waits_for_every_node() -> None:
    b = backend(
        seed=5, capacity={"timing": {"cluster_setup": 0, "provisioning": 10, "ami_setup": 10, "custom_scripts": 5000}}
    )
    request = cluster_request(workers=2)
    request["InstanceGroups"][1]["LifeCycleConfig"] = {"SourceS3Uri": "s3://sagemaker-x/", "OnCreate": "slow.sh"}
    b.dispatch("CreateCluster", request)
    clock(b).advance(100)
    assert describe(b)["ClusterStatus"] == "Creating"
    assert groups(b)["controller"]["CurrentCount"] == 1
    clock(b).advance(5000)
    assert describe(b)["ClusterStatus"] == "InService"


def test_listeners_hear_every_node_state_change() -> None:
    heard: list[dict[str, object]] = []
    b = backend(seed=6)
    b.add_listener(heard.append)
    b.dispatch("CreateCluster", cluster_request(workers=1))
    wait_status(b, "InService")
    worker = next(n["InstanceId"] for n in nodes(b) if n["InstanceGroupName"] == "gpu")
    mine = [(e["status"], e["phase"]) for e in heard if e["instance_id"] == worker]
    assert mine == [("Pending", "provisioning"), ("Pending", "ami-setup"), ("Running", "running")]
    assert heard[0]["cluster_name"] == "demo" and heard[0]["instance_type"] in ("ml.m5.xlarge", "ml.c5.xlarge")
