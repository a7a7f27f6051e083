"""Records rendered as API responses (the botocore output shapes), plus opaque pagination tokens."""

from __future__ import annotations

import base64
import copy
from collections.abc import Sequence
from typing import Any, TypeVar

from hyperpod_scheduler.emulator.errors import validation
from hyperpod_scheduler.emulator.model_state import Cluster, ClusterEvent, Group, Node

T = TypeVar("T")

# Group members whose request and response shapes are the same: echoed exactly as sent
# (absent stays absent; LifeCycleConfig above all, since the scheduler re-sends it).
_ECHO = (
    "InstanceType",
    "LifeCycleConfig",
    "ExecutionRole",
    "ThreadsPerCore",
    "InstanceStorageConfigs",
    "OnStartDeepHealthChecks",
    "TrainingPlanArn",
    "OverrideVpcConfig",
    "ScheduledUpdateConfig",
    "SlurmConfig",
    "CapacityRequirements",
    "NetworkInterface",
)
_CLUSTER_ECHO = (
    "VpcConfig",
    "Orchestrator",
    "NodeRecovery",
    "NodeProvisioningMode",
    "ClusterRole",
    "TieredStorageConfig",
)


def describe_group(c: Cluster, g: Group) -> dict[str, Any]:
    out: dict[str, Any] = {
        "CurrentCount": c.running(g.name),
        "TargetCount": g.target,
        "InstanceGroupName": g.name,
        "Status": g.status,
    }
    if g.min_count is not None:
        out["MinCount"] = g.min_count
    for key in _ECHO:
        if key in g.spec:
            out[key] = copy.deepcopy(g.spec[key])
    if "InstanceRequirements" in g.spec:
        types = list(g.spec["InstanceRequirements"].get("InstanceTypes") or [])
        out["InstanceRequirements"] = {"CurrentInstanceTypes": types, "DesiredInstanceTypes": types}
    if "ImageId" in g.spec:
        out["CurrentImageId"] = out["DesiredImageId"] = g.spec["ImageId"]
    k8s = g.spec.get("KubernetesConfig")
    if isinstance(k8s, dict):
        details: dict[str, Any] = {}
        if "Labels" in k8s:
            details["CurrentLabels"] = details["DesiredLabels"] = dict(k8s["Labels"])
        if "Taints" in k8s:
            details["CurrentTaints"] = details["DesiredTaints"] = copy.deepcopy(k8s["Taints"])
        out["KubernetesConfig"] = details
    return out


def describe_cluster(c: Cluster) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ClusterArn": c.arn,
        "ClusterName": c.name,
        "ClusterStatus": c.status,
        "CreationTime": c.created,
        "InstanceGroups": [describe_group(c, g) for g in c.groups.values()],
    }
    if c.failure_message and c.status in ("Failed", "RollingBack", "InService"):
        out["FailureMessage"] = c.failure_message
    for key in _CLUSTER_ECHO:
        if key in c.config:
            out[key] = copy.deepcopy(c.config[key])
    if "NodeRecovery" not in out:
        out["NodeRecovery"] = "Automatic"
    auto = c.config.get("AutoScaling")
    if isinstance(auto, dict):
        out["AutoScaling"] = {**copy.deepcopy(auto), "Status": "InService"}
    return out


def cluster_summary(c: Cluster) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ClusterArn": c.arn,
        "ClusterName": c.name,
        "CreationTime": c.created,
        "ClusterStatus": c.status,
    }
    plans = sorted({g.spec["TrainingPlanArn"] for g in c.groups.values() if g.spec.get("TrainingPlanArn")})
    if plans:
        out["TrainingPlanArns"] = plans
    return out


def _status(n: Node) -> dict[str, Any]:
    status: dict[str, Any] = {"Status": n.status}
    if n.message:
        status["Message"] = n.message
    return status


def _hostname(n: Node) -> str:
    return "ip-" + n.private_ip.replace(".", "-")


def node_summary(n: Node, with_logical_id: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "InstanceGroupName": n.group,
        "InstanceId": n.instance_id,
        "InstanceType": n.instance_type,
        "LaunchTime": n.launch_time,
        "InstanceStatus": _status(n),
        "PrivateDnsHostname": _hostname(n),
    }
    if with_logical_id and n.logical_id:
        out["NodeLogicalId"] = n.logical_id
    return out


def _zone_id(region: str) -> str:
    """``us-east-1`` -> ``use1-az1`` (the emulator puts every node in the region's first zone)."""
    parts = region.split("-")
    if len(parts) == 3:
        return f"{parts[0]}{parts[1][0]}{parts[2]}-az1"
    return f"{region}-az1"


def node_details(c: Cluster, n: Node) -> dict[str, Any]:
    g = c.groups.get(n.group)
    spec = g.spec if g else {}
    out: dict[str, Any] = {
        "InstanceGroupName": n.group,
        "InstanceId": n.instance_id,
        "InstanceStatus": _status(n),
        "InstanceType": n.instance_type,
        "LaunchTime": n.launch_time,
        "PrivatePrimaryIp": n.private_ip,
        "PrivateDnsHostname": _hostname(n),
        "Placement": {"AvailabilityZone": f"{c.region}a", "AvailabilityZoneId": _zone_id(c.region)},
    }
    if n.logical_id:
        out["NodeLogicalId"] = n.logical_id
    for key in ("LifeCycleConfig", "OverrideVpcConfig", "ThreadsPerCore", "InstanceStorageConfigs"):
        if key in spec:
            out[key] = copy.deepcopy(spec[key])
    return out


def pending_logical_node(g: Group, logical_id: str) -> dict[str, Any]:
    """A node BatchAddClusterNodes promised but the pool has not launched yet."""
    return {
        "InstanceGroupName": g.name,
        "NodeLogicalId": logical_id,
        "InstanceType": g.instance_type,
        "InstanceStatus": {"Status": "Pending", "Message": "Waiting for capacity"},
    }


def event_summary(c: Cluster, ev: ClusterEvent) -> dict[str, Any]:
    out: dict[str, Any] = {
        "EventId": ev.event_id,
        "ClusterArn": c.arn,
        "ClusterName": c.name,
        "ResourceType": ev.resource_type,
        "EventTime": ev.time,
        "Description": ev.description,
        "EventLevel": ev.level,
    }
    if ev.group:
        out["InstanceGroupName"] = ev.group
    if ev.instance_id:
        out["InstanceId"] = ev.instance_id
    return out


def event_detail(c: Cluster, ev: ClusterEvent) -> dict[str, Any]:
    out = event_summary(c, ev)
    meta = {k: v for k, v in ev.metadata.items() if v is not None}
    metadata: dict[str, Any] = {}
    if ev.resource_type == "Cluster" and "FailureMessage" in meta:
        metadata["Cluster"] = {"FailureMessage": meta["FailureMessage"]}
    if ev.resource_type == "InstanceGroup":
        if "InstanceGroupScaling" in meta:
            metadata["InstanceGroupScaling"] = meta["InstanceGroupScaling"]
        elif "FailureMessage" in meta:
            metadata["InstanceGroup"] = {"FailureMessage": meta["FailureMessage"]}
    if ev.resource_type == "Instance":
        inst = {k: meta[k] for k in ("FailureMessage", "LcsExecutionState", "NodeLogicalId") if k in meta}
        if inst:
            metadata["Instance"] = inst
    if metadata:
        out["EventDetails"] = {"EventMetadata": metadata}
    return out


def page(items: Sequence[T], params: dict[str, Any], default_max: int = 100) -> tuple[list[T], str | None]:
    """One page of ``items`` per MaxResults/NextToken; the token is an opaque offset."""
    token = params.get("NextToken")
    start = 0
    if token:
        try:
            start = int(base64.urlsafe_b64decode(token.encode()).decode().removeprefix("o:"))
        except (ValueError, UnicodeDecodeError):
            raise validation(f"Invalid pagination token: {token!r}") from None
    size = params.get("MaxResults") or default_max
    chunk = list(items[start : start + size])
    nxt = None
    if start + size < len(items):
        nxt = base64.urlsafe_b64encode(f"o:{start + size}".encode()).decode()
    return chunk, nxt
