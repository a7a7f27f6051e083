"""DescribeCluster reports every member a group (or cluster) was created or updated with, in its twin.

Generated from the installed botocore model: for every member of the request shape, a valid value is
drawn from the shape, a group is created (and another updated) with it, and DescribeCluster must
report it as documented. The members are read from the model, not from the emulator's table, so a
member botocore adds tomorrow fails here until the emulator handles it (and this file says how it
should be reported).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from botocore.model import StructureShape
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.emulator.model_images import BUILT_IN, version_key
from hyperpod_scheduler.emulator.model_views import CLUSTER_TWINS, GROUP_TWINS
from hyperpod_scheduler.emulator.shapes import shape
from tests.emulator_model.helpers import ROLE, backend, cluster_request, describe, groups, wait_status
from tests.emulator_model.shape_values import member_value

SPEC = "ClusterInstanceGroupSpecification"
PLAN_TYPE = "ml.p5.48xlarge"
PLAN = {"instance_type": PLAN_TYPE, "count": 8, "start": "+0s", "duration_hours": 240}
PLAN_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/reserved-p5-for-tests"
LATEST = max(BUILT_IN, key=lambda r: r.key)
# Members a request always carries, so every example reports them too.
ALWAYS = ("InstanceGroupName", "InstanceCount", "ExecutionRole")
# Members an existing group cannot change (or that change its instance type): a new group carries them.
NEEDS_NEW_GROUP = {"InstanceType", "InstanceRequirements", "ThreadsPerCore", "SlurmConfig", "TrainingPlanArn"}


def _members(name: str) -> list[str]:
    s = shape(name)
    assert isinstance(s, StructureShape)
    return list(s.members)


def test_the_twin_tables_cover_the_model_both_ways() -> None:
    details = set(_members("ClusterInstanceGroupDetails"))
    assert set(GROUP_TWINS) == set(_members(SPEC))
    assert {t for twins in GROUP_TWINS.values() for t in twins} <= details
    cluster_members = set(_members("CreateClusterRequest")) | set(_members("UpdateClusterRequest"))
    assert set(CLUSTER_TWINS) == cluster_members
    assert {t for twins in CLUSTER_TWINS.values() for t in twins} <= set(_members("DescribeClusterResponse"))


# --- making a drawn value valid for the documented rules, and what DescribeCluster must say ---------


def _fix(member: str, value: Any, group: dict[str, Any], capacity: dict[str, Any]) -> Any:
    """Adjust a value drawn from the shape to the semantic rules the shape cannot express."""
    if member == "InstanceRequirements":
        group.pop("InstanceType", None)
    elif member == "LifeCycleConfig":
        value.setdefault("SourceS3Uri", "s3://sagemaker-tests/lifecycle/")
        if "OnCreate" in value and "OnInitComplete" in value:
            del value["OnInitComplete"]  # the two are mutually exclusive
        if "OnCreate" not in value and "OnInitComplete" not in value:
            value["OnCreate"] = "on_create.sh"
    elif member == "MinInstanceCount":
        group["InstanceCount"] = max(group["InstanceCount"], value)
    elif member == "TrainingPlanArn":
        capacity["training_plans"] = {"reserved-p5-for-tests": PLAN}
        group["InstanceType"] = PLAN_TYPE
        value = PLAN_ARN
    elif member == "AutoPatchConfig" and "DrainPolicy" in value:
        value["PatchingStrategy"] = "DrainFirst"  # DrainPolicy is valid only with DrainFirst
    elif member == "ImageReleaseVersion":
        if all(r.key != version_key(value) for r in BUILT_IN):
            capacity["images"] = [{"version": value}]
        else:
            value = next(r.version for r in BUILT_IN if r.key == version_key(value))
    elif member == "SlurmConfig":
        value["NodeType"] = "Compute" if value["NodeType"] == "Controller" else value["NodeType"]
        if value["NodeType"] == "Compute":
            value["PartitionNames"] = value.get("PartitionNames") or ["gpu"]
        else:
            value.pop("PartitionNames", None)
    return value


def _auto_patch(v: dict[str, Any]) -> dict[str, Any]:
    out = {
        "PatchingStrategy": v["PatchingStrategy"],
        "IdleWaitWindowInSeconds": v.get("IdleWaitWindowInSeconds", 86400),
    }
    for key in ("DeploymentConfig", "DrainPolicy"):
        if key in v:
            out[key] = v[key]
    if v.get("PatchSchedule"):
        out["CurrentPatchSchedule"] = out["DesiredPatchSchedule"] = v["PatchSchedule"]
    return out


def _kubernetes(v: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "Labels" in v:
        out["CurrentLabels"] = out["DesiredLabels"] = v["Labels"]
    if "Taints" in v:
        out["CurrentTaints"] = out["DesiredTaints"] = v["Taints"]
    return out


def _image_id(v: str) -> dict[str, Any]:
    return {"DesiredImageId": LATEST.image_id if v == "default" else v}


# What the documentation says DescribeCluster reports for a member sent with value v.
EXPECTED: dict[str, Callable[[Any], dict[str, Any]]] = {
    "InstanceCount": lambda v: {"TargetCount": v},
    "MinInstanceCount": lambda v: {"MinCount": v},
    "InstanceRequirements": lambda v: {
        "InstanceRequirements": {"CurrentInstanceTypes": v["InstanceTypes"], "DesiredInstanceTypes": v["InstanceTypes"]}
    },
    "TrainingPlanArn": lambda v: {"TrainingPlanArn": v, "TrainingPlanStatus": "Active"},
    "ImageId": _image_id,
    "AutoPatchConfig": lambda v: {"AutoPatchConfig": _auto_patch(v)},
    "ImageReleaseVersion": lambda v: {"DesiredImageReleaseVersion": v},
    "KubernetesConfig": lambda v: {"KubernetesConfig": _kubernetes(v)},
}
ECHOED = {
    "InstanceGroupName",
    "InstanceType",
    "LifeCycleConfig",
    "ExecutionRole",
    "ThreadsPerCore",
    "InstanceStorageConfigs",
    "OnStartDeepHealthChecks",
    "OverrideVpcConfig",
    "ScheduledUpdateConfig",
    "SlurmConfig",
    "CapacityRequirements",
    "NetworkInterface",
}


def expected(member: str, value: Any) -> dict[str, Any]:
    if member in ECHOED:
        return {member: value}
    if member in EXPECTED:
        return EXPECTED[member](value)
    raise AssertionError(f"the model has a member {member} this test (and the emulator) does not handle yet")


def _reported(described_group: dict[str, Any], want: dict[str, Any]) -> dict[str, Any]:
    return {k: described_group.get(k) for k in want}


def _worker(name: str = "gpu") -> dict[str, Any]:
    return {
        "InstanceGroupName": name,
        "InstanceType": "ml.c5.xlarge",
        "InstanceCount": 1,
        "ExecutionRole": ROLE,
        "SlurmConfig": {"NodeType": "Compute", "PartitionNames": [name]},
    }


@pytest.mark.parametrize("member", _members(SPEC))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_created_group_reports_every_member_it_was_given(member: str, data: st.DataObject) -> None:
    capacity: dict[str, Any] = {}
    group = _worker()
    value = _fix(member, copy.deepcopy(data.draw(member_value(SPEC, member), label=member)), group, capacity)
    group[member] = value
    if member == "InstanceGroupName":
        group["SlurmConfig"]["PartitionNames"] = [value]
    b = backend(capacity or None)
    request = cluster_request(workers=1)
    request["InstanceGroups"][1] = group
    b.dispatch("CreateCluster", request)
    reported = groups(b)[group["InstanceGroupName"]]
    want = {k: v for m in (*ALWAYS, member) for k, v in expected(m, group[m]).items()}
    assert _reported(reported, want) == want


@pytest.mark.parametrize("member", [m for m in _members(SPEC) if m not in ("InstanceGroupName", "ExecutionRole")])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_an_updated_group_reports_every_member_it_was_given(member: str, data: st.DataObject) -> None:
    capacity: dict[str, Any] = {}
    name = "extra" if member in NEEDS_NEW_GROUP else "gpu"
    group = _worker(name)
    value = _fix(member, copy.deepcopy(data.draw(member_value(SPEC, member), label=member)), group, capacity)
    group[member] = value
    b = backend(capacity or None)
    b.dispatch("CreateCluster", cluster_request(workers=1))
    d = wait_status(b, "InService")
    others = [
        {k: g[k] for k in ("InstanceGroupName", "InstanceType", "ExecutionRole", "SlurmConfig")}
        | {"InstanceCount": g["TargetCount"]}
        for g in d["InstanceGroups"]
        if g["InstanceGroupName"] != name
    ]
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": [*others, group]})
    reported = groups(b)[name]
    want = {k: v for m in (*ALWAYS, member) for k, v in expected(m, group[m]).items()}
    assert _reported(reported, want) == want


# --- cluster-level members ---------------------------------------------------------------------------

CLUSTER_EXPECTED: dict[str, Callable[[Any], dict[str, Any]]] = {
    "AutoScaling": lambda v: {"AutoScaling": {**v, "Status": "InService"}},
}
CLUSTER_ECHOED = {
    "VpcConfig",
    "Orchestrator",
    "NodeRecovery",
    "NodeProvisioningMode",
    "ClusterRole",
    "TieredStorageConfig",
}


def _eks(request: dict[str, Any]) -> None:
    for g in request["InstanceGroups"]:
        g.pop("SlurmConfig", None)
        g["LifeCycleConfig"] = {"SourceS3Uri": "s3://sagemaker-tests/lifecycle/", "OnCreate": "on_create.sh"}


@pytest.mark.parametrize("member", sorted(CLUSTER_ECHOED | set(CLUSTER_EXPECTED)))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_cluster_reports_every_member_it_was_created_with(member: str, data: st.DataObject) -> None:
    value = copy.deepcopy(data.draw(member_value("CreateClusterRequest", member), label=member))
    request = cluster_request(workers=1)
    if member == "Orchestrator":
        if "Eks" in value:
            value.pop("Slurm", None)
            _eks(request)
        elif value.get("Slurm") is None:
            value["Slurm"] = {}
    if member == "NodeProvisioningMode":
        request["Orchestrator"] = {"Slurm": {}}
    request[member] = value
    b = backend()
    b.dispatch("CreateCluster", request)
    want = CLUSTER_EXPECTED[member](value) if member in CLUSTER_EXPECTED else {member: value}
    d = describe(b)
    assert {k: d.get(k) for k in want} == want


def test_the_cluster_members_without_a_describe_twin_are_accounted_for() -> None:
    unreported = {m for m, twins in CLUSTER_TWINS.items() if not twins}
    assert unreported == {
        "InstanceGroupsToDelete",
        "RestrictedInstanceGroups",
        "RestrictedInstanceGroupsConfig",
        "Tags",
    }
    reported = {m for m, twins in CLUSTER_TWINS.items() if twins} - {"ClusterName", "InstanceGroups"}
    assert reported == CLUSTER_ECHOED | set(CLUSTER_EXPECTED)
