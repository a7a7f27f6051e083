"""Records rendered as API responses (the botocore output shapes), plus opaque pagination tokens."""

from __future__ import annotations

import base64
import copy
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

from hyperpod_scheduler.emulator.errors import validation
from hyperpod_scheduler.emulator.model_images import version_key
from hyperpod_scheduler.emulator.model_state import Cluster, ClusterEvent, ClusterOperation, Group, Node
from hyperpod_scheduler.emulator.model_world import World

T = TypeVar("T")

# Every member of the request shape ClusterInstanceGroupSpecification, and the members of
# ClusterInstanceGroupDetails that DescribeCluster reports it in. A test checks this table against the
# installed botocore model both ways, so a member AWS adds tomorrow fails it until it is handled here.
GROUP_TWINS: dict[str, tuple[str, ...]] = {
    "InstanceCount": ("TargetCount",),
    "MinInstanceCount": ("MinCount",),
    "InstanceGroupName": ("InstanceGroupName",),
    "InstanceType": ("InstanceType",),
    "InstanceRequirements": ("InstanceRequirements",),  # as Current/DesiredInstanceTypes
    "LifeCycleConfig": ("LifeCycleConfig",),
    "ExecutionRole": ("ExecutionRole",),
    "ThreadsPerCore": ("ThreadsPerCore",),
    "InstanceStorageConfigs": ("InstanceStorageConfigs",),
    "OnStartDeepHealthChecks": ("OnStartDeepHealthChecks",),
    "TrainingPlanArn": ("TrainingPlanArn", "TrainingPlanStatus"),
    "OverrideVpcConfig": ("OverrideVpcConfig",),
    "ScheduledUpdateConfig": ("ScheduledUpdateConfig",),
    "ImageId": ("CurrentImageId", "DesiredImageId"),
    "AutoPatchConfig": ("AutoPatchConfig",),  # as ClusterAutoPatchConfigDetails
    "ImageReleaseVersion": ("CurrentImageReleaseVersion", "DesiredImageReleaseVersion", "ImageVersionStatus"),
    "KubernetesConfig": ("KubernetesConfig",),  # as Current/Desired labels and taints
    "SlurmConfig": ("SlurmConfig",),
    "CapacityRequirements": ("CapacityRequirements",),
    "NetworkInterface": ("NetworkInterface",),
}
# Members whose request and output shapes carry the same content: echoed exactly as sent (absent
# stays absent; LifeCycleConfig above all, since a scheduler re-sends it).
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

# Every member of CreateClusterRequest and UpdateClusterRequest, and where DescribeCluster (or another
# answer) reports it; ``()`` with a reason where nothing does.
CLUSTER_TWINS: dict[str, tuple[str, ...]] = {
    "ClusterName": ("ClusterName",),
    "InstanceGroups": ("InstanceGroups",),
    "InstanceGroupsToDelete": (),  # the groups leave InstanceGroups
    "RestrictedInstanceGroups": (),  # refused: the emulator does not model restricted groups
    "RestrictedInstanceGroupsConfig": (),  # refused with them
    "Tags": (),  # reported by ListTags
    "VpcConfig": ("VpcConfig",),
    "Orchestrator": ("Orchestrator",),
    "NodeRecovery": ("NodeRecovery",),
    "TieredStorageConfig": ("TieredStorageConfig",),
    "NodeProvisioningMode": ("NodeProvisioningMode",),
    "ClusterRole": ("ClusterRole",),
    "AutoScaling": ("AutoScaling",),  # as ClusterAutoScalingConfigOutput, with Status
}
_CLUSTER_ECHO = (
    "VpcConfig",
    "Orchestrator",
    "NodeRecovery",
    "NodeProvisioningMode",
    "ClusterRole",
    "TieredStorageConfig",
)

IDLE_WAIT_DEFAULT = 86_400  # ClusterAutoPatchConfig.IdleWaitWindowInSeconds: "The default is 86400"


def auto_patch_details(sent: dict[str, Any]) -> dict[str, Any]:
    """ClusterAutoPatchConfig as ClusterAutoPatchConfigDetails: the patch schedule asked for is the
    desired one, and (nothing pending in the emulator) the current one too."""
    out: dict[str, Any] = {
        "PatchingStrategy": sent["PatchingStrategy"],
        "IdleWaitWindowInSeconds": sent.get("IdleWaitWindowInSeconds", IDLE_WAIT_DEFAULT),
    }
    for key in ("DeploymentConfig", "DrainPolicy"):
        if key in sent:
            out[key] = copy.deepcopy(sent[key])
    schedule = sent.get("PatchSchedule")
    if isinstance(schedule, dict) and schedule:
        out["CurrentPatchSchedule"] = copy.deepcopy(schedule)
        out["DesiredPatchSchedule"] = copy.deepcopy(schedule)
    return out


def kubernetes_details(sent: dict[str, Any]) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if "Labels" in sent:
        details["CurrentLabels"] = dict(sent["Labels"])
        details["DesiredLabels"] = dict(sent["Labels"])
    if "Taints" in sent:
        details["CurrentTaints"] = copy.deepcopy(sent["Taints"])
        details["DesiredTaints"] = copy.deepcopy(sent["Taints"])
    return details


def current_image(c: Cluster, g: Group) -> tuple[str | None, str]:
    """What the group's running nodes run (the oldest release, if they differ), else what they last ran."""
    running = [n for n in c.nodes.values() if n.group == g.name and n.phase == "running"]
    if not running:
        return g.ran_version, g.ran_image_id
    first = running[0]
    if all(n.image_version == first.image_version for n in running):
        return first.image_version, first.image_id
    managed = [n for n in running if n.image_version is not None]
    oldest = min(managed, key=lambda n: version_key(n.image_version or "0.0.0"))
    return oldest.image_version, oldest.image_id


def describe_group(w: World, c: Cluster, g: Group, t: datetime) -> dict[str, Any]:
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
    if isinstance(g.spec.get("KubernetesConfig"), dict):
        out["KubernetesConfig"] = kubernetes_details(g.spec["KubernetesConfig"])
    if isinstance(g.spec.get("AutoPatchConfig"), dict):
        out["AutoPatchConfig"] = auto_patch_details(g.spec["AutoPatchConfig"])
    plan = g.spec.get("TrainingPlanArn")
    if isinstance(plan, str):
        p = w.plans().get(plan)
        out["TrainingPlanStatus"] = p.status(t, w.origin) if p is not None else "NotFound"
    ran_version, ran_id = current_image(c, g)
    if g.image_id:
        out["DesiredImageId"] = g.image_id
    if ran_id:
        out["CurrentImageId"] = ran_id
    if g.image_version is not None:
        out["DesiredImageReleaseVersion"] = g.image_version
    if ran_version is not None:
        out["CurrentImageReleaseVersion"] = ran_version
        out["ImageVersionStatus"] = w.catalogue().status(ran_version, t, w.origin)
    if g.scaling_op is not None:
        out["ActiveOperations"] = {"Scaling": 1}
    return out


def describe_cluster(w: World, c: Cluster, t: datetime) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ClusterArn": c.arn,
        "ClusterName": c.name,
        "ClusterStatus": c.status,
        "CreationTime": c.created,
        "InstanceGroups": [describe_group(w, c, g, t) for g in c.groups.values()],
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


def hostname(region: str, n: Node) -> str:
    """EC2's private DNS name: ``ip-10-1-2-3.ec2.internal`` in us-east-1, ``.REGION.compute.internal``
    elsewhere (the model's pattern wants the domain part)."""
    host = "ip-" + n.private_ip.replace(".", "-")
    return f"{host}.ec2.internal" if region == "us-east-1" else f"{host}.{region}.compute.internal"


def _node_image(w: World, n: Node, t: datetime, out: dict[str, Any]) -> None:
    if n.image_version is not None:
        out["CurrentImageReleaseVersion"] = n.image_version
        out["ImageVersionStatus"] = w.catalogue().status(n.image_version, t, w.origin)


def node_summary(w: World, c: Cluster, n: Node, t: datetime, with_logical_id: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "InstanceGroupName": n.group,
        "InstanceId": n.instance_id,
        "InstanceType": n.instance_type,
        "LaunchTime": n.launch_time,
        "InstanceStatus": _status(n),
        "PrivateDnsHostname": hostname(c.region, n),
    }
    if with_logical_id and n.logical_id:
        out["NodeLogicalId"] = n.logical_id
    _node_image(w, n, t, out)
    return out


def zone_id(region: str) -> str:
    """``us-east-1`` -> ``use1-az1`` (the emulator puts every node in the region's first zone)."""
    parts = region.split("-")
    if len(parts) == 3:
        return f"{parts[0]}{parts[1][0]}{parts[2]}-az1"
    return f"{region}-az1"


def node_details(w: World, c: Cluster, n: Node, t: datetime) -> dict[str, Any]:
    g = c.groups.get(n.group)
    spec = g.spec if g else {}
    out: dict[str, Any] = {
        "InstanceGroupName": n.group,
        "InstanceId": n.instance_id,
        "InstanceStatus": _status(n),
        "InstanceType": n.instance_type,
        "LaunchTime": n.launch_time,
        "PrivatePrimaryIp": n.private_ip,
        "PrivateDnsHostname": hostname(c.region, n),
        "Placement": {"AvailabilityZone": f"{c.region}a", "AvailabilityZoneId": zone_id(c.region)},
    }
    if n.logical_id:
        out["NodeLogicalId"] = n.logical_id
    for key in ("LifeCycleConfig", "OverrideVpcConfig", "ThreadsPerCore", "InstanceStorageConfigs", "NetworkInterface"):
        if key in spec:
            out[key] = copy.deepcopy(spec[key])
    if isinstance(spec.get("KubernetesConfig"), dict):
        out["KubernetesConfig"] = kubernetes_details(spec["KubernetesConfig"])
    if n.image_id:
        out["CurrentImageId"] = n.image_id
    if g is not None and g.image_id:
        out["DesiredImageId"] = g.image_id
    _node_image(w, n, t, out)
    if g is not None and g.image_version is not None:
        out["DesiredImageReleaseVersion"] = g.image_version
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
    if ev.operation_id:
        out["OperationId"] = ev.operation_id
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


def operation_summary(c: Cluster, op: ClusterOperation) -> dict[str, Any]:
    return {
        "OperationId": op.operation_id,
        "ClusterArn": c.arn,
        "Type": op.kind,
        "Status": op.status,
        "CreationTime": op.created,
    }


def operation_detail(c: Cluster, op: ClusterOperation) -> dict[str, Any]:
    out = operation_summary(c, op)
    if op.kind == "Scaling":
        out["ScalingDetails"] = [
            {
                "InstanceGroupName": e.group,
                "Status": e.status,
                "Original": dict(e.original),
                "Desired": dict(e.desired),
            }
            for e in op.scaling
        ]
    elif op.group is not None and op.checks:
        check: dict[str, Any] = {"InstanceGroupName": op.group, "DeepHealthChecks": list(op.checks)}
        if op.instances:
            check["InstanceIds"] = list(op.instances[:500])
        out["DeepHealthCheckDetails"] = [check]
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
