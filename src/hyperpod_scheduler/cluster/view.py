"""A typed, validated view of a DescribeCluster answer: the engine and the guards never read raw API dicts elsewhere.

An answer with a missing or malformed field raises ``MalformedAnswer`` naming the field and value,
so a tick can log a clear skip instead of crashing or, worse, recording a wrong size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hyperpod_scheduler.aws.answers import UnknownMember, unknown_in
from hyperpod_scheduler.aws.failures import FailureCause, cause_of
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
    # Every type the group may run: InstanceType alone, or for a flexible group (InstanceRequirements,
    # no InstanceType) the union of its Current and Desired instance types. Scarcity, prices and the
    # snapshot read this, never ``instance_type`` alone (issue 26, case 4).
    instance_types: tuple[str, ...] = ()
    # Where ``node_type`` came from: "SlurmConfig", or the lifecycle source's provisioning_parameters.json
    # ("provisioning_parameters.json"); None when the group has no Slurm role known.
    role_source: str | None = None
    # Why this group's Slurm role is unknown (the legacy file could not be read), or None. A stop keeps
    # such a group with any compute that stays: it may be the controller.
    role_unknown: str | None = None

    @property
    def flexible(self) -> bool:
        return self.instance_type is None and len(self.instance_types) > 0

    @property
    def type_text(self) -> str | None:
        """The instance type(s) for people: ``ml.p5.48xlarge``, or ``flexible ml.p5.48xlarge|ml.p4d.24xlarge``."""
        if self.instance_type is not None or not self.instance_types:
            return self.instance_type
        return "flexible " + "|".join(self.instance_types)


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
    # Why the last update failed, read once from FailureMessage (``aws.failures``); None: no failure said.
    failure_cause: FailureCause | None = None

    @property
    def autoscaled(self) -> bool:
        return self.autoscaling_mode == "Enable"

    @property
    def orchestrator(self) -> str | None:
        """``Eks`` or ``Slurm`` as the answer's Orchestrator names it (None: not said)."""
        orch = self.raw.get("Orchestrator")
        if isinstance(orch, Mapping):
            for name in ("Eks", "Slurm"):
                if name in orch:
                    return name
        return None

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

    @property
    def eks(self) -> bool:
        """Orchestrated by EKS (``Orchestrator.Eks``): no Slurm head to keep."""
        orchestrator = self.raw.get("Orchestrator")
        return isinstance(orchestrator, Mapping) and "Eks" in orchestrator

    def with_roles(
        self, roles: Mapping[str, str], unknown: Mapping[str, str], source: str = "provisioning_parameters.json"
    ) -> ClusterView:
        """This view with Slurm roles (group -> Controller / Login / Compute) filled in for the groups
        SlurmConfig does not name, and ``unknown`` (group -> why its role could not be learned) on the
        others. SlurmConfig always wins: a group it names is left as it is."""
        groups = []
        for g in self.groups:
            if g.node_type is None and g.name in roles:
                g = replace(g, node_type=roles[g.name], role_source=source, role_unknown=None)
            elif g.node_type is None and g.name in unknown:
                g = replace(g, role_unknown=unknown[g.name])
            groups.append(g)
        return replace(self, groups=tuple(groups))


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


def _types(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise MalformedAnswer(f"DescribeCluster answer: {where} is {value!r}, expected a list of instance types")
    return value


def instance_types_of(details: Mapping[str, Any], where: str) -> tuple[str | None, tuple[str, ...]]:
    """``InstanceType``, and every type the group may run (the one place this is worked out)."""
    itype = details.get("InstanceType")
    if isinstance(itype, str) and itype:
        return itype, (itype,)
    requirements = details.get("InstanceRequirements")
    if requirements is None:
        return None, ()
    if not isinstance(requirements, Mapping):
        raise MalformedAnswer(
            f"DescribeCluster answer: {where} InstanceRequirements is {requirements!r}, expected an object"
        )
    union: list[str] = []
    for member in ("CurrentInstanceTypes", "DesiredInstanceTypes"):
        for t in _types(requirements.get(member), f"{where} InstanceRequirements.{member}"):
            if t not in union:
                union.append(t)
    return None, tuple(union)


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
    itype, itypes = instance_types_of(details, where)
    return GroupView(
        name=name,
        current=current,
        target=target,
        min_count=min_count,
        instance_type=itype,
        status=details.get("Status") if isinstance(details.get("Status"), str) else None,
        node_type=node_type if isinstance(node_type, str) else None,
        training_plan_arn=details.get("TrainingPlanArn") if isinstance(details.get("TrainingPlanArn"), str) else None,
        tier=tier_of(details),
        details=details,
        image_id=_opt_str(details.get("CurrentImageId"), f"{where} CurrentImageId"),
        image_release=_opt_str(details.get("CurrentImageReleaseVersion"), f"{where} CurrentImageReleaseVersion"),
        instance_types=itypes,
        role_source="SlurmConfig" if isinstance(node_type, str) else None,
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
        failure_cause=cause_of(shortened(failure, 2000) if isinstance(failure, str) and failure else None),
    )
