"""A typed, validated view of a DescribeCluster answer: the engine and the guards never read raw API dicts elsewhere.

An answer with a missing or malformed field raises ``MalformedAnswer`` naming the field and value,
so a tick can log a clear skip instead of crashing or, worse, recording a wrong size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hyperpod_scheduler.aws.answers import UnknownMember, unknown_in
from hyperpod_scheduler.cluster.tiers import Tier, tier_of
from hyperpod_scheduler.errors import MalformedAnswer
from hyperpod_scheduler.inputs.text import shortened

__all__ = ["ClusterView", "GroupView", "MalformedAnswer", "parse_cluster", "parse_group"]

# States in which the scheduler must not send an update (issue 4: not touched that tick).
BUSY_CLUSTER_STATES = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack", "Deleting", "Failed"})
KNOWN_CLUSTER_STATES = BUSY_CLUSTER_STATES | {"InService"}
# In Continuous mode the cluster stays InService while a group changes; UpdateCluster is refused then.
BUSY_GROUP_STATES = frozenset({"Creating", "Updating", "Deleting", "SystemUpdating"})


@dataclass(frozen=True)
class GroupView:
    name: str
    current: int
    target: int
    min_count: int | None
    instance_type: str | None
    status: str | None
    node_type: str | None
    training_plan_arn: str | None
    tier: Tier
    details: Mapping[str, Any] = field(repr=False, compare=False)
    image_id: str | None = None  # CurrentImageId: the AMI the running nodes have
    image_release: str | None = None  # CurrentImageReleaseVersion


@dataclass(frozen=True)
class ClusterView:
    name: str
    arn: str
    status: str
    failure_message: str | None
    continuous: bool
    groups: tuple[GroupView, ...]
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    # Members of the answer the installed botocore model does not define (``aws.answers``): an update
    # rebuilt from the parsed answer would drop them.
    unknown_members: tuple[UnknownMember, ...] = ()
    autoscaling_mode: str | None = None  # AutoScaling.Mode: "Enable" means Karpenter owns the counts

    @property
    def autoscaled(self) -> bool:
        return self.autoscaling_mode == "Enable"

    @property
    def busy(self) -> bool:
        return self.status in BUSY_CLUSTER_STATES or bool(self.busy_groups)

    @property
    def busy_groups(self) -> list[str]:
        return [g.name for g in self.groups if g.status in BUSY_GROUP_STATES]

    def busy_reason(self) -> str:
        if self.status in BUSY_CLUSTER_STATES:
            return f"cluster is {self.status}"
        return ", ".join(f"group '{g.name}' is {g.status}" for g in self.groups if g.status in BUSY_GROUP_STATES)

    @property
    def cluster_id(self) -> str:
        return self.arn.rsplit("/", 1)[-1]

    def group(self, name: str) -> GroupView | None:
        return next((g for g in self.groups if g.name == name), None)

    def targets(self) -> dict[str, int]:
        return {g.name: g.target for g in self.groups}

    def currents(self) -> dict[str, int]:
        return {g.name: g.current for g in self.groups}

    @property
    def all_zero(self) -> bool:
        return all(g.target == 0 and g.current == 0 for g in self.groups)


def _int(value: Any, where: str, *, default: int | None = None) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MalformedAnswer(f"DescribeCluster answer: {where} is {value!r}, expected a count >= 0")
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise MalformedAnswer(f"DescribeCluster answer: {where} is {value!r}, expected a non-empty string")
    return value


def _opt_str(value: Any, where: str) -> str | None:
    return None if value is None else _str(value, where)


def parse_group(details: Any, index: int) -> GroupView:
    if not isinstance(details, Mapping):
        raise MalformedAnswer(f"DescribeCluster answer: InstanceGroups[{index}] is {details!r}, expected an object")
    name = _str(details.get("InstanceGroupName"), f"InstanceGroups[{index}].InstanceGroupName")
    where = f"group '{name}'"
    current = _int(details.get("CurrentCount"), f"{where} CurrentCount")
    # Some answers omit TargetCount while a group is settled; then target == current.
    target = _int(details.get("TargetCount"), f"{where} TargetCount", default=current)
    min_raw = details.get("MinCount")
    min_count = None if min_raw is None else _int(min_raw, f"{where} MinCount")
    slurm = details.get("SlurmConfig")
    node_type = slurm.get("NodeType") if isinstance(slurm, Mapping) else None
    return GroupView(
        name=name,
        current=current,
        target=target,
        min_count=min_count,
        instance_type=details.get("InstanceType") if isinstance(details.get("InstanceType"), str) else None,
        status=details.get("Status") if isinstance(details.get("Status"), str) else None,
        node_type=node_type if isinstance(node_type, str) else None,
        training_plan_arn=details.get("TrainingPlanArn") if isinstance(details.get("TrainingPlanArn"), str) else None,
        tier=tier_of(details),
        details=details,
        image_id=_opt_str(details.get("CurrentImageId"), f"{where} CurrentImageId"),
        image_release=_opt_str(details.get("CurrentImageReleaseVersion"), f"{where} CurrentImageReleaseVersion"),
    )


# The botocore model's ClusterInstanceGroupSpecifications (CreateCluster, UpdateCluster): 1 to 100 groups.
MAX_GROUPS = 100


def parse_cluster(answer: Mapping[str, Any]) -> ClusterView:
    """Parse a DescribeCluster response; raises ``MalformedAnswer`` on anything we cannot trust."""
    if not isinstance(answer, Mapping):
        raise MalformedAnswer(f"DescribeCluster answer is {type(answer).__name__}, expected an object")
    arn = _str(answer.get("ClusterArn"), "ClusterArn")
    name = answer.get("ClusterName") if isinstance(answer.get("ClusterName"), str) else arn.rsplit("/", 1)[-1]
    status = _str(answer.get("ClusterStatus"), "ClusterStatus")
    if status not in KNOWN_CLUSTER_STATES:
        raise MalformedAnswer(
            f"DescribeCluster answer: cluster '{name}' ClusterStatus is {status!r}, not a known state"
        )
    groups_raw = answer.get("InstanceGroups")
    if not isinstance(groups_raw, list):
        raise MalformedAnswer(
            f"DescribeCluster answer: cluster '{name}' InstanceGroups is {groups_raw!r}, expected a list"
        )
    if len(groups_raw) > MAX_GROUPS:
        # Checked before a group is parsed: 20,000 of them took the tick 56 s and said nothing useful.
        raise MalformedAnswer(
            f"DescribeCluster answer: cluster '{name}' lists {len(groups_raw):,} instance groups; "
            f"a cluster has at most {MAX_GROUPS} (CreateCluster and UpdateCluster take 1 to {MAX_GROUPS})"
        )
    groups = tuple(parse_group(g, i) for i, g in enumerate(groups_raw))
    seen: set[str] = set()
    for group in groups:
        if group.name in seen:
            raise MalformedAnswer(f"DescribeCluster answer: cluster '{name}' lists group '{group.name}' twice")
        seen.add(group.name)
    failure = answer.get("FailureMessage")
    scaling = answer.get("AutoScaling")
    if scaling is not None and not isinstance(scaling, Mapping):
        raise MalformedAnswer(
            f"DescribeCluster answer: cluster '{name}' AutoScaling is {scaling!r}, expected an object"
        )
    mode = scaling.get("Mode") if scaling is not None else None
    return ClusterView(
        name=str(name),
        arn=arn,
        status=status,
        # Kept short: it reaches event lines, history and the terminal (a 60 MB one was seen).
        failure_message=shortened(failure, 2000) if isinstance(failure, str) and failure else None,
        continuous=answer.get("NodeProvisioningMode") == "Continuous",
        groups=groups,
        raw=answer,
        unknown_members=unknown_in(answer),
        autoscaling_mode=_opt_str(mode, f"cluster '{name}' AutoScaling.Mode"),
    )
