"""A DescribeCluster answer read two ways: a per-group summary for people, and the CreateCluster-form
configuration it implies (for ``describe --as-spec`` and for rules that need the current request).

Pure functions over the response dict; the AWS call lives in the CLI.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from botocore.model import ListShape, Shape, StructureShape

from hyperpod_scheduler.aws.model import service_model
from hyperpod_scheduler.cluster.tiers import Tier, tier_of

_CLUSTER_SAME_SHAPE = ("VpcConfig", "Orchestrator", "NodeRecovery", "NodeProvisioningMode", "ClusterRole")

# Describe members whose request twin has another name: the "Desired" value is what the group is
# configured to be, so re-sending it changes nothing.
_RENAMED: dict[str, dict[str, str]] = {
    "InstanceRequirements": {"DesiredInstanceTypes": "InstanceTypes"},
    "KubernetesConfig": {"DesiredLabels": "Labels", "DesiredTaints": "Taints"},
    "AutoPatchConfig": {"DesiredPatchSchedule": "PatchSchedule"},
}
# ImageId is not reported as a request value (only Current/DesiredImageId); leaving it out keeps the
# group's image as it is, whereas sending CurrentImageId would pin a group that floats.
_NEVER_COPIED = {"InstanceCount", "MinInstanceCount", "ImageId", "ImageReleaseVersion"}


def _prune(shape: Shape, value: Any) -> Any:
    """Keep only what the request shape knows, so a describe-only field never leaks into a request."""
    if isinstance(shape, StructureShape) and isinstance(value, Mapping):
        return {k: _prune(shape.members[k], v) for k, v in value.items() if k in shape.members}
    if isinstance(shape, ListShape) and isinstance(value, list):
        return [_prune(shape.member, v) for v in value]
    return copy.deepcopy(value)


def group_count(details: Mapping[str, Any]) -> int:
    """The size a group is meant to have: TargetCount when reported, else CurrentCount."""
    for key in ("TargetCount", "CurrentCount"):
        value = details.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def group_request_from_details(
    details: Mapping[str, Any], count: int | None = None, min_count: int | None = None
) -> dict[str, Any]:
    """One ClusterInstanceGroupSpecification rebuilt from ClusterInstanceGroupDetails, driven by the
    botocore model: every request member the answer reports is copied (renamed where the shapes differ,
    pruned to the request shape). ``count`` defaults to the group's target size, ``min_count`` to MinCount.

    ``LifeCycleConfig`` is copied exactly (absent stays absent): re-sending a group with a different
    block would change its tier.
    """
    shape = service_model().shape_for("ClusterInstanceGroupSpecification")
    assert isinstance(shape, StructureShape)
    out: dict[str, Any] = {"InstanceGroupName": details.get("InstanceGroupName")}
    out["InstanceCount"] = group_count(details) if count is None else count
    for member, member_shape in shape.members.items():
        if member in _NEVER_COPIED or member == "InstanceGroupName" or details.get(member) is None:
            continue
        value = details[member]
        renames = _RENAMED.get(member)
        if renames is not None and isinstance(value, Mapping):
            value = {renames[k]: v for k, v in value.items() if k in renames}
            if not value:
                continue
        out[member] = _prune(member_shape, value)
    slurm = out.get("SlurmConfig")
    if isinstance(slurm, dict) and not slurm.get("PartitionNames"):
        # Answers may report an empty list on Controller/Login groups; partitions belong to Compute only.
        slurm.pop("PartitionNames", None)
    minimum = min_count if min_count is not None else details.get("MinCount")
    if isinstance(minimum, int) and not isinstance(minimum, bool):
        out["MinInstanceCount"] = min(minimum, out["InstanceCount"])
    return out


def request_from_describe(response: Mapping[str, Any]) -> dict[str, Any]:
    """The CreateCluster-form configuration of a described cluster (tags are not part of Describe)."""
    out: dict[str, Any] = {"ClusterName": response.get("ClusterName")}
    groups = response.get("InstanceGroups") or []
    out["InstanceGroups"] = [group_request_from_details(g) for g in groups if isinstance(g, Mapping)]
    for key in _CLUSTER_SAME_SHAPE:
        if response.get(key) is not None:
            out[key] = response[key]
    return out


@dataclass(frozen=True)
class GroupSummary:
    name: str
    instance_type: str
    current: int
    target: int
    minimum: int | None
    status: str
    tier: Tier
    node_type: str | None
    partition: str | None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tier": self.tier.value}


def summarize_groups(response: Mapping[str, Any]) -> list[GroupSummary]:
    rows = []
    for g in response.get("InstanceGroups") or []:
        if not isinstance(g, Mapping):
            continue
        raw = g.get("SlurmConfig")
        slurm: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        partitions = slurm.get("PartitionNames") or []
        current = g.get("CurrentCount")
        rows.append(
            GroupSummary(
                name=str(g.get("InstanceGroupName", "?")),
                instance_type=str(g.get("InstanceType", "-")),
                current=current if isinstance(current, int) else 0,
                target=group_count(g),
                minimum=g.get("MinCount") if isinstance(g.get("MinCount"), int) else None,
                status=str(g.get("Status", "-")),
                tier=tier_of(g),
                node_type=slurm.get("NodeType"),
                partition=partitions[0] if partitions else None,
            )
        )
    return rows
