"""Checking a spec: render it, judge the request with the shared rules, and point each problem back
at the spec field the user wrote (``instance_groups[1].lifecycle.on_create``, not the API path)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hyperpod_scheduler.cluster.legacy import legacy_problems
from hyperpod_scheduler.cluster.render import render_create_request, spec_from_request
from hyperpod_scheduler.cluster.rules import check_create_request
from hyperpod_scheduler.cluster.spec import ClusterSpec
from hyperpod_scheduler.cluster.tiers import Tier, tier_of
from hyperpod_scheduler.errors import Problem, SpecError, errors_only, warnings_only

_CLUSTER_FIELDS = {
    "ClusterName": "name",
    "InstanceGroups": "instance_groups",
    "NodeProvisioningMode": "node_provisioning_mode",
    "NodeRecovery": "node_recovery",
    "ClusterRole": "cluster_role",
    "VpcConfig": "vpc",
    "Tags": "tags",
    "Orchestrator.Slurm.SlurmConfigStrategy": "slurm_config_strategy",
    "Orchestrator.Eks.ClusterArn": "eks_cluster_arn",
    "Orchestrator.Eks": "eks_cluster_arn",
}
_GROUP_FIELDS = {
    "InstanceGroupName": "name",
    "InstanceCount": "count",
    "MinInstanceCount": "min_count",
    "InstanceType": "instance_type",
    "ExecutionRole": "execution_role",
    "ThreadsPerCore": "threads_per_core",
    "TrainingPlanArn": "training_plan_arn",
    "ImageId": "image_id",
    "LifeCycleConfig": "lifecycle",
    "SlurmConfig": "slurm",
    "OverrideVpcConfig": "override_vpc",
    "OnStartDeepHealthChecks": "deep_health_checks",
    "InstanceStorageConfigs": "ebs_volume_gb",
}
_INNER_FIELDS = {
    "SourceS3Uri": "source_s3_uri",
    "OnCreate": "on_create",
    "OnInitComplete": "on_init_complete",
    "NodeType": "node_type",
    "PartitionNames": "partition",
    "SecurityGroupIds": "security_group_ids",
    "Subnets": "subnets",
}
_INHERITABLE = {
    "execution_role", "instance_type", "threads_per_core", "lifecycle", "ebs_volume_gb",
    "deep_health_checks", "training_plan_arn", "image_id",
}  # fmt: skip
_GROUP_PATH = re.compile(r"^InstanceGroups\[(?P<i>\d*)\](?:\.(?P<key>[A-Za-z]+)(?P<rest>.*))?$")


def _inner(rest: str) -> str:
    return re.sub(r"[A-Za-z][A-Za-z0-9]*", lambda m: _INNER_FIELDS.get(m.group(0), m.group(0)), rest)


def _top_key(path: str) -> str:
    return re.split(r"[.\[]", path, maxsplit=1)[0]


def spec_field(api_field: str, spec: ClusterSpec) -> str:
    """The spec path a user edits to fix a problem reported at ``api_field`` of the rendered request."""
    m = _GROUP_PATH.match(api_field)
    if m is None:
        if _top_key(api_field) in spec.api:  # passed through verbatim: point at the api: block
            return f"api.{api_field}"
        for api, key in sorted(_CLUSTER_FIELDS.items(), key=lambda kv: -len(kv[0])):
            if api_field == api or api_field.startswith((api + ".", api + "[")):
                return key + _inner(api_field[len(api) :])
        return api_field
    index, key, rest = m.group("i"), m.group("key"), m.group("rest") or ""
    base = f"instance_groups[{index}]"
    group = spec.instance_groups[int(index)] if index and int(index) < len(spec.instance_groups) else None
    if key is None:
        return base
    if key not in _GROUP_FIELDS or (group is not None and key in group.api):
        return f"{base}.api.{key}{rest}"
    name = _GROUP_FIELDS[key]
    if key == "InstanceStorageConfigs":
        rest = ""  # ebs_volume_gb is one number; the list structure behind it is ours, not the user's
    inherited = (
        group is not None
        and name in _INHERITABLE
        and getattr(group, name) is None
        and getattr(spec.defaults, name) is not None
    )
    if inherited:
        return f"defaults.{name}{_inner(rest)}"
    return f"{base}.{name}{_inner(rest)}"


@dataclass(frozen=True)
class SpecReport:
    """What ``cluster validate`` shows: the request, every problem (spec-located) and each group's tier."""

    spec: ClusterSpec
    request: dict[str, Any]
    problems: list[Problem] = field(default_factory=list)
    api_fields: dict[int, str] = field(default_factory=dict)  # index into problems -> API path

    @property
    def errors(self) -> list[Problem]:
        return errors_only(self.problems)

    @property
    def warnings(self) -> list[Problem]:
        return warnings_only(self.problems)

    @property
    def ok(self) -> bool:
        return not self.errors

    def tiers(self) -> dict[str, Tier]:
        groups = self.request.get("InstanceGroups")
        # A raw request may hold anything here; its problems already say what is wrong with it.
        listed = groups if isinstance(groups, list) else []
        return {str(g.get("InstanceGroupName")): tier_of(g) for g in listed if isinstance(g, Mapping)}

    def raise_for_errors(self, source: str | None = None) -> None:
        if self.errors:
            raise SpecError(self.errors, source)


def check_spec(spec: ClusterSpec) -> SpecReport:
    """Render ``spec`` and apply the model and semantic rules; SpecError only if it cannot render."""
    request = render_create_request(spec)
    problems: list[Problem] = []
    api_fields: dict[int, str] = {}
    seen: set[tuple[str, str | None, str]] = set()
    for p in check_create_request(request):
        located = Problem(spec_field(p.field, spec), p.message, p.group, p.severity)
        # The model check and the rules often flag one value twice (a negative count, two partitions):
        # the first (the model's) is enough to fix it, and a shorter list is easier to act on.
        key = (located.field, located.group, located.severity)
        if key in seen:
            continue
        seen.add(key)
        api_fields[len(problems)] = p.field
        problems.append(located)
    problems.extend(legacy_problems(spec))
    return SpecReport(spec, request, problems, api_fields)


def check_request(request: dict[str, Any]) -> SpecReport:
    """A raw CreateCluster request (``--cli-input-json`` form): checked as written, fields in API names."""
    problems = check_create_request(request)
    try:
        spec = spec_from_request(request)
    except (SpecError, ValueError, TypeError, KeyError, AttributeError):
        spec = ClusterSpec(name=str(request.get("ClusterName") or "?"), instance_groups=[])
    return SpecReport(spec, request, problems, {i: p.field for i, p in enumerate(problems)})
