"""Every response fits the botocore output shape: known members, required members, enums, types."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.model import ListShape, MapShape, Shape, StringShape, StructureShape

from hyperpod_scheduler.aws.model import operation_model
from tests.emulator_model.helpers import backend, cluster_request, events, groups, nodes, resend, run_until, wait_status


def _check(shape: Shape, value: Any, path: str, out: list[str]) -> None:
    if isinstance(shape, StructureShape):
        if not isinstance(value, dict):
            out.append(f"{path}: expected a structure, got {type(value).__name__}")
            return
        for key in value:
            if key not in shape.members:
                out.append(f"{path}.{key}: not a member of {shape.name}")
        for key in shape.required_members:
            if key not in value:
                out.append(f"{path}.{key}: required by {shape.name} but missing")
        for key, member in shape.members.items():
            if key in value:
                _check(member, value[key], f"{path}.{key}", out)
    elif isinstance(shape, ListShape):
        if not isinstance(value, list):
            out.append(f"{path}: expected a list")
            return
        for i, item in enumerate(value):
            _check(shape.member, item, f"{path}[{i}]", out)
    elif isinstance(shape, MapShape):
        if not isinstance(value, dict):
            out.append(f"{path}: expected a map")
    elif isinstance(shape, StringShape):
        if not isinstance(value, str):
            out.append(f"{path}: expected a string, got {value!r}")
        elif shape.enum and value not in shape.enum:
            out.append(f"{path}: {value!r} is not one of {shape.name}")
    elif shape.type_name == "timestamp":
        if not (isinstance(value, datetime) and value.tzinfo is not None):
            out.append(f"{path}: expected an aware datetime, got {value!r}")
    elif shape.type_name in ("integer", "long"):
        if not isinstance(value, int) or isinstance(value, bool):
            out.append(f"{path}: expected an integer, got {value!r}")
    elif shape.type_name == "boolean" and not isinstance(value, bool):
        out.append(f"{path}: expected a boolean, got {value!r}")


def problems(operation: str, response: dict[str, Any]) -> list[str]:
    shape = operation_model(operation).output_shape
    out: list[str] = []
    if shape is None:
        return [] if response == {} else [f"{operation} has no output, got {response}"]
    _check(shape, response, operation, out)
    return out


def test_every_operation_answers_in_its_output_shape() -> None:
    b = backend(seed=1)
    found: list[str] = []

    def call(op: str, params: dict[str, Any]) -> dict[str, Any]:
        response = b.dispatch(op, params)
        found.extend(problems(op, response))
        return response

    request = cluster_request(
        continuous=True,
        login=True,
        tier="extension",
        OnStartDeepHealthChecks=["InstanceStress"],
        ThreadsPerCore=1,
        InstanceStorageConfigs=[{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
    )
    request["VpcConfig"] = {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]}
    request["NodeRecovery"] = "Automatic"
    request["Tags"] = [{"Key": "k", "Value": "v"}]
    arn = call("CreateCluster", request)["ClusterArn"]
    call("DescribeCluster", {"ClusterName": "demo"})  # while Creating
    call("ListClusterNodes", {"ClusterName": "demo", "IncludeNodeLogicalIds": True})
    wait_status(b, "InService")
    add = call(
        "BatchAddClusterNodes",
        {"ClusterName": "demo", "NodesToAdd": [{"InstanceGroupName": "nope", "IncrementTargetCountBy": 1}]},
    )
    run_until(b, lambda: groups(b)["gpu"]["Status"] == "InService")
    add = call(
        "BatchAddClusterNodes",
        {"ClusterName": "demo", "NodesToAdd": [{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}]},
    )
    call("DescribeClusterNode", {"ClusterName": "demo", "NodeLogicalId": add["Successful"][0]["NodeLogicalId"]})
    described = call("DescribeCluster", {"ClusterName": arn})
    listed = nodes(b, IncludeNodeLogicalIds=True)
    found.extend(problems("ListClusterNodes", {"ClusterNodeSummaries": listed}))
    worker = next(n["InstanceId"] for n in listed if n["InstanceGroupName"] == "gpu")
    call("DescribeClusterNode", {"ClusterName": "demo", "NodeId": worker})
    call("BatchDeleteClusterNodes", {"ClusterName": "demo", "NodeIds": [worker, "i-0123456789abcdef0"]})
    call("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(described, {"gpu": 1})})
    for ev in events(b):
        found.extend(problems("ListClusterEvents", {"Events": [ev]}))
        call("DescribeClusterEvent", {"ClusterName": "demo", "EventId": ev["EventId"]})
    call("ListClusters", {"MaxResults": 1})
    call("ListTags", {"ResourceArn": arn})
    call("AddTags", {"ResourceArn": arn, "Tags": [{"Key": "a", "Value": "b"}]})
    call("DeleteTags", {"ResourceArn": arn, "TagKeys": ["a"]})
    call("DeleteCluster", {"ClusterName": "demo"})
    call("DescribeCluster", {"ClusterName": "demo"})
    assert found == []


def test_default_mode_failure_responses_fit_too() -> None:
    b = backend(seed=2, capacity={"instance_types": {"ml.p5.48xlarge": 0}})
    b.dispatch("CreateCluster", cluster_request(worker_type="ml.p5.48xlarge"))
    failed = wait_status(b, "Failed")
    assert problems("DescribeCluster", failed) == []
    assert all(problems("ListClusterEvents", {"Events": [e]}) == [] for e in events(b))
