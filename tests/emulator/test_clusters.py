"""Cluster lifecycle over the wire: create in every tier and mode, describe, scale to 0 and back, delete."""

from __future__ import annotations

import re
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.emulator.clients import T0, make_client
from tests.emulator.driving import groups_by_name, run_until, wait_status
from tests.emulator.emu_requests import LIFECYCLE, create_request, update_groups_from

ARN = re.compile(r"^arn:aws:sagemaker:us-west-2:123456789012:cluster/[a-z0-9]{12}$")


@pytest.mark.parametrize("continuous", [False, True], ids=["all-or-nothing", "continuous"])
@pytest.mark.parametrize("tier", ["ami", "extension", "custom"])
def test_create_reaches_in_service_with_the_fields_boto3_expects(
    emu: Emulator, sm: Any, tier: str, continuous: bool
) -> None:
    request = create_request(f"c-{tier}", tier=tier, continuous=continuous, login=True)
    arn = sm.create_cluster(**request)["ClusterArn"]
    assert ARN.match(arn), arn
    first = sm.describe_cluster(ClusterName=f"c-{tier}")
    assert first["ClusterStatus"] == "Creating"
    assert first["CreationTime"] == T0

    described = wait_status(emu, sm, f"c-{tier}", "InService")
    assert described["ClusterArn"] == arn
    assert sm.describe_cluster(ClusterName=arn)["ClusterName"] == f"c-{tier}"  # name or ARN
    if continuous:
        assert described["NodeProvisioningMode"] == "Continuous"
        run_until(emu, lambda: _all_groups_full(sm, f"c-{tier}"))
        described = sm.describe_cluster(ClusterName=f"c-{tier}")
    groups = groups_by_name(described)
    for sent in request["InstanceGroups"]:
        got = groups[sent["InstanceGroupName"]]
        assert got["CurrentCount"] == got["TargetCount"] == sent["InstanceCount"]
        assert got["Status"] == "InService"
        assert got["InstanceType"] == sent["InstanceType"]
        assert got["SlurmConfig"] == sent["SlurmConfig"]
        if LIFECYCLE[tier] is None:
            assert "LifeCycleConfig" not in got  # absent stays absent
        else:
            assert got["LifeCycleConfig"] == LIFECYCLE[tier]

    nodes = _all_nodes(sm, f"c-{tier}")
    assert len(nodes) == 4
    assert {n["InstanceStatus"]["Status"] for n in nodes} == {"Running"}
    assert all(re.match(r"^i-[0-9a-f]{17}$", n["InstanceId"]) for n in nodes)
    one = sm.describe_cluster_node(ClusterName=arn, NodeId=nodes[0]["InstanceId"])["NodeDetails"]
    assert one["InstanceId"] == nodes[0]["InstanceId"]
    assert one["InstanceStatus"]["Status"] == "Running"


def _all_groups_full(sm: Any, name: str) -> bool:
    groups = sm.describe_cluster(ClusterName=name)["InstanceGroups"]
    return all(g["CurrentCount"] == g["TargetCount"] for g in groups)


def _all_nodes(sm: Any, name: str, **filters: Any) -> list[dict[str, Any]]:
    pages = sm.get_paginator("list_cluster_nodes").paginate(ClusterName=name, **filters)
    return [n for page in pages for n in page["ClusterNodeSummaries"]]


FIXED_TIMING = {
    "cluster_setup": 60,
    "provisioning": 300,
    "ami_setup": 200,
    "extension_script": 100,
    "custom_scripts": 600,
}


def test_lifecycle_tiers_change_how_long_nodes_take() -> None:
    took = {}
    for tier in ("ami", "extension", "custom"):
        with running_emulator(virtual_start=T0, capacity={"timing": FIXED_TIMING}, check_answers=True) as emu:
            sm = make_client(emu.endpoint)
            sm.create_cluster(**create_request("tiers", tier=tier, worker_type="ml.c5.xlarge"))
            wait_status(emu, sm, "tiers", "InService")
            took[tier] = emu.clock.now() - T0
    assert took["ami"] < took["extension"] < took["custom"], took


def test_scale_to_zero_and_back_keeps_the_group_configuration(emu: Emulator, sm: Any) -> None:
    request = create_request("nightly", tier="extension")
    request["InstanceGroups"][1].pop("LifeCycleConfig")  # mixed tiers: AMI-based workers
    sm.create_cluster(**request)
    before = wait_status(emu, sm, "nightly", "InService")

    sm.update_cluster(ClusterName="nightly", InstanceGroups=update_groups_from(before, {"gpu": 0}))
    assert sm.describe_cluster(ClusterName="nightly")["ClusterStatus"] == "Updating"
    zero = wait_status(emu, sm, "nightly", "InService")
    gpu = groups_by_name(zero)["gpu"]
    assert (gpu["CurrentCount"], gpu["TargetCount"]) == (0, 0)
    assert _all_nodes(sm, "nightly", InstanceGroupNameContains="gpu") == []
    assert len(_all_nodes(sm, "nightly")) == 1  # the controller stays

    sm.update_cluster(ClusterName="nightly", InstanceGroups=update_groups_from(zero, {"gpu": 2}))
    after = wait_status(emu, sm, "nightly", "InService")
    for name, g in groups_by_name(after).items():
        old = groups_by_name(before)[name]
        assert g["CurrentCount"] == old["CurrentCount"]
        assert g.get("LifeCycleConfig") == old.get("LifeCycleConfig")
        assert ("LifeCycleConfig" in g) == ("LifeCycleConfig" in old)
    assert len(_all_nodes(sm, "nightly", InstanceGroupNameContains="gpu")) == 2


def test_update_while_updating_is_a_conflict(emu: Emulator, sm: Any) -> None:
    sm.create_cluster(**create_request("busy"))
    described = wait_status(emu, sm, "busy", "InService")
    sm.update_cluster(ClusterName="busy", InstanceGroups=update_groups_from(described, {"gpu": 1}))
    with pytest.raises(sm.exceptions.ConflictException):
        sm.update_cluster(ClusterName="busy", InstanceGroups=update_groups_from(described, {"gpu": 0}))


def test_update_cannot_change_the_instance_type(emu: Emulator, sm: Any) -> None:
    sm.create_cluster(**create_request("fixed"))
    described = wait_status(emu, sm, "fixed", "InService")
    groups = update_groups_from(described, {})
    groups[1]["InstanceType"] = "ml.p4d.24xlarge"
    with pytest.raises(ClientError) as exc:
        sm.update_cluster(ClusterName="fixed", InstanceGroups=groups)
    assert exc.value.response["Error"]["Code"] == "ValidationException"
    assert "InstanceType" in exc.value.response["Error"]["Message"]


def test_unknown_cluster_everywhere(sm: Any) -> None:
    for call in (
        lambda: sm.describe_cluster(ClusterName="ghost"),
        lambda: sm.delete_cluster(ClusterName="ghost"),
        lambda: sm.list_cluster_nodes(ClusterName="ghost"),
        lambda: sm.update_cluster(ClusterName="ghost", InstanceGroups=create_request("g")["InstanceGroups"]),
    ):
        with pytest.raises(sm.exceptions.ResourceNotFound):
            call()


def test_same_name_twice_is_refused(sm: Any) -> None:
    sm.create_cluster(**create_request("twice"))
    with pytest.raises(ClientError) as exc:
        sm.create_cluster(**create_request("twice"))
    assert exc.value.response["Error"]["Code"] == "ResourceInUse"


def test_delete_goes_through_deleting_then_the_cluster_is_gone(emu: Emulator, sm: Any) -> None:
    sm.create_cluster(**create_request("doomed"))
    wait_status(emu, sm, "doomed", "InService")
    sm.delete_cluster(ClusterName="doomed")
    assert sm.describe_cluster(ClusterName="doomed")["ClusterStatus"] == "Deleting"

    def gone() -> bool:
        try:
            sm.describe_cluster(ClusterName="doomed")
        except sm.exceptions.ResourceNotFound:
            return True
        return False

    run_until(emu, gone)
    assert sm.list_clusters()["ClusterSummaries"] == []


def test_list_clusters_pages_and_filters(emu: Emulator, sm: Any) -> None:
    for i in range(5):
        sm.create_cluster(**create_request(f"fleet-{i}", worker_type="ml.c5.xlarge"))
    pages = list(sm.get_paginator("list_clusters").paginate(PaginationConfig={"PageSize": 2}))
    assert len(pages) == 3
    names = sorted(s["ClusterName"] for p in pages for s in p["ClusterSummaries"])
    assert names == [f"fleet-{i}" for i in range(5)]
    summary = pages[0]["ClusterSummaries"][0]
    assert ARN.match(summary["ClusterArn"]) and summary["ClusterStatus"] == "Creating"
    only = sm.list_clusters(NameContains="fleet-3")["ClusterSummaries"]
    assert [s["ClusterName"] for s in only] == ["fleet-3"]


def test_list_cluster_nodes_pages_and_filters_by_group(emu: Emulator, sm: Any) -> None:
    sm.create_cluster(**create_request("paged", workers=5, worker_type="ml.c5.xlarge"))
    wait_status(emu, sm, "paged", "InService")
    pages = list(sm.get_paginator("list_cluster_nodes").paginate(ClusterName="paged", PaginationConfig={"PageSize": 2}))
    assert [len(p["ClusterNodeSummaries"]) for p in pages] == [2, 2, 2]
    workers = _all_nodes(sm, "paged", InstanceGroupNameContains="gpu")
    assert len(workers) == 5 and {n["InstanceGroupName"] for n in workers} == {"gpu"}


def test_tags_on_cluster_arns(sm: Any) -> None:
    arn = sm.create_cluster(**create_request("tagged", tags={"schedule": "office-hours"}))["ClusterArn"]
    assert sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "schedule", "Value": "office-hours"}]
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": "team", "Value": "research"}])
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
    assert tags == {"schedule": "office-hours", "team": "research"}
    sm.delete_tags(ResourceArn=arn, TagKeys=["schedule"])
    assert sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "team", "Value": "research"}]
