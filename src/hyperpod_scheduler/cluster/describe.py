"""A DescribeCluster answer read two ways: a per-group summary for people, and the request it implies
(the UpdateCluster a stop or start sends, and the CreateCluster form for ``describe --as-spec``).

Pure functions over the response dict; the AWS call lives in the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from botocore.model import StructureShape

from hyperpod_scheduler.aws.model import operation_model
from hyperpod_scheduler.cluster.round_trip import rebuild, shape, twins
from hyperpod_scheduler.cluster.tiers import Tier, tier_of

GROUP_REQUEST = "ClusterInstanceGroupSpecification"
GROUP_ANSWER = "ClusterInstanceGroupDetails"
RESTRICTED_REQUEST = "ClusterRestrictedInstanceGroupSpecification"
RESTRICTED_ANSWER = "ClusterRestrictedInstanceGroupDetails"
# Counts are what an update changes; the answer reports them as TargetCount/MinCount, not by twin.
COUNT_MEMBERS = frozenset({"InstanceCount", "MinInstanceCount"})
# The group's AMI. Re-sent by default: botocore documents an omitted ImageReleaseVersion as "the latest
# available version is used", so a nightly stop and start could otherwise move every node to a newer
# AMI (unconfirmed on AWS; the safe reading is that it can). ``pin_image=False`` is `ami: follow-latest`.
IMAGE_MEMBERS = frozenset({"ImageId", "ImageReleaseVersion"})
# Cluster-level members handled on their own (the groups) or never re-sent (they name a change).
_NOT_SETTINGS = frozenset(
    {"ClusterName", "InstanceGroups", "RestrictedInstanceGroups", "InstanceGroupsToDelete", "Tags"}
)


def group_count(details: Mapping[str, Any]) -> int:
    """The size a group is meant to have: TargetCount when reported, else CurrentCount."""
    for key in ("TargetCount", "CurrentCount"):
        value = details.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def _structure(name: str) -> StructureShape:
    found = shape(name)
    assert isinstance(found, StructureShape)
    return found


def group_request_from_details(
    details: Mapping[str, Any],
    count: int | None = None,
    min_count: int | None = None,
    *,
    pin_image: bool = True,
    restricted: bool = False,
) -> dict[str, Any]:
    """One group's request (``ClusterInstanceGroupSpecification``, or the restricted twin) rebuilt from
    its DescribeCluster details: every member the answer reports is re-sent as it is (``round_trip``),
    with only ``InstanceCount`` (default: the target size) and ``MinInstanceCount`` (default: MinCount,
    never above the count) set here. ``LifeCycleConfig`` is copied exactly (absent stays absent):
    re-sending a group with a different block would change its tier.
    """
    request_shape = _structure(RESTRICTED_REQUEST if restricted else GROUP_REQUEST)
    answer_shape = _structure(RESTRICTED_ANSWER if restricted else GROUP_ANSWER)
    out: dict[str, Any] = {"InstanceGroupName": details.get("InstanceGroupName")}
    out["InstanceCount"] = group_count(details) if count is None else count
    for member, member_shape, source, source_shape in twins(request_shape, answer_shape):
        if member in COUNT_MEMBERS or member == "InstanceGroupName" or (member in IMAGE_MEMBERS and not pin_image):
            continue
        if details.get(source) is None:
            continue
        out[member] = rebuild(member_shape, source_shape, details[source])
    slurm = out.get("SlurmConfig")
    if isinstance(slurm, dict) and not slurm.get("PartitionNames"):
        # Answers may report an empty list on Controller/Login groups; partitions belong to Compute only.
        slurm.pop("PartitionNames", None)
    if "MinInstanceCount" in request_shape.members:
        minimum = min_count if min_count is not None else details.get("MinCount")
        if isinstance(minimum, int) and not isinstance(minimum, bool):
            out["MinInstanceCount"] = min(minimum, out["InstanceCount"])
    return out


def cluster_settings(response: Mapping[str, Any], operation: str = "UpdateCluster") -> dict[str, Any]:
    """The cluster-level members of ``operation``'s request that the answer reports, re-sent as they are
    (NodeRecovery, NodeProvisioningMode, Orchestrator, TieredStorageConfig, AutoScaling, ClusterRole...)."""
    request_shape = operation_model(operation).input_shape
    answer_shape = operation_model("DescribeCluster").output_shape
    assert isinstance(request_shape, StructureShape) and isinstance(answer_shape, StructureShape)
    out: dict[str, Any] = {}
    for member, member_shape, source, source_shape in twins(request_shape, answer_shape):
        if member in _NOT_SETTINGS or response.get(source) is None:
            continue
        out[member] = rebuild(member_shape, source_shape, response[source])
    orchestrator = out.get("Orchestrator")
    slurm = orchestrator.get("Slurm") if isinstance(orchestrator, dict) else None
    if response.get("NodeProvisioningMode") == "Continuous" and isinstance(slurm, dict):
        # Documented: Continuous mode runs in merge mode only and sending any strategy is an API error,
        # so an answer that reports the effective strategy must not have it echoed back.
        slurm.pop("SlurmConfigStrategy", None)
    return out


def request_from_describe(response: Mapping[str, Any], *, pin_image: bool = True) -> dict[str, Any]:
    """The CreateCluster-form configuration of a described cluster (tags are not part of Describe)."""
    out: dict[str, Any] = {"ClusterName": response.get("ClusterName")}
    groups = response.get("InstanceGroups") or []
    out["InstanceGroups"] = [
        group_request_from_details(g, pin_image=pin_image) for g in groups if isinstance(g, Mapping)
    ]
    restricted = response.get("RestrictedInstanceGroups")
    if isinstance(restricted, list) and restricted:
        out["RestrictedInstanceGroups"] = [
            group_request_from_details(g, pin_image=pin_image, restricted=True)
            for g in restricted
            if isinstance(g, Mapping)
        ]
    out.update(cluster_settings(response, "CreateCluster"))
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
