"""A DescribeCluster answer read two ways: a per-group summary for people, and the CreateCluster-form
configuration it implies (for ``describe --as-spec`` and for rules that need the current request).

Pure functions over the response dict; the AWS call lives in the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hyperpod_scheduler.cluster.tiers import Tier, tier_of

# Members of ClusterInstanceGroupDetails that have the same name and shape in the request.
_SAME_SHAPE = (
    "InstanceGroupName",
    "InstanceType",
    "LifeCycleConfig",
    "ExecutionRole",
    "ThreadsPerCore",
    "InstanceStorageConfigs",
    "OnStartDeepHealthChecks",
    "TrainingPlanArn",
    "OverrideVpcConfig",
    "ScheduledUpdateConfig",
    "CapacityRequirements",
)
_CLUSTER_SAME_SHAPE = ("VpcConfig", "Orchestrator", "NodeRecovery", "NodeProvisioningMode", "ClusterRole")


def group_count(details: Mapping[str, Any]) -> int:
    """The size a group is meant to have: TargetCount when reported, else CurrentCount."""
    for key in ("TargetCount", "CurrentCount"):
        value = details.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def group_request_from_details(details: Mapping[str, Any]) -> dict[str, Any]:
    """One ClusterInstanceGroupSpecification rebuilt from ClusterInstanceGroupDetails.

    ``LifeCycleConfig`` is copied exactly (absent stays absent): re-sending a group with a different
    block would change its tier. ``ImageId`` is left out: the details report Current/DesiredImageId,
    and re-sending either could start an image change the user never asked for.
    """
    out: dict[str, Any] = {k: details[k] for k in _SAME_SHAPE if details.get(k) is not None}
    out["InstanceCount"] = group_count(details)
    if isinstance(details.get("MinCount"), int):
        out["MinInstanceCount"] = details["MinCount"]
    slurm = details.get("SlurmConfig")
    if isinstance(slurm, Mapping) and slurm.get("NodeType"):
        block: dict[str, Any] = {"NodeType": slurm["NodeType"]}
        if slurm.get("PartitionNames"):
            block["PartitionNames"] = list(slurm["PartitionNames"])
        out["SlurmConfig"] = block
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
