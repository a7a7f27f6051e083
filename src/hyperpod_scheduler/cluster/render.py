"""Spec <-> CreateCluster request. Pure functions: no I/O, no AWS.

``render_create_request`` is the one place a spec becomes API input; ``spec_from_request`` is its
inverse (used to show a live cluster as a spec), so ``spec_from_request(render_create_request(s))``
gives ``s`` back with defaults folded into the groups.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperpod_scheduler.cluster.spec import (
    AMI,
    ClusterSpec,
    GroupDefaults,
    InstanceGroup,
    Lifecycle,
    Vpc,
)
from hyperpod_scheduler.errors import Problem, SpecError

_LIFECYCLE_KEYS = (
    ("source_s3_uri", "SourceS3Uri"),
    ("on_create", "OnCreate"),
    ("on_init_complete", "OnInitComplete"),
)


def _vpc(vpc: Vpc) -> dict[str, Any]:
    return {"SecurityGroupIds": list(vpc.security_group_ids), "Subnets": list(vpc.subnets)}


def _lifecycle(value: Lifecycle) -> dict[str, Any]:
    return {api: getattr(value, key) for key, api in _LIFECYCLE_KEYS if getattr(value, key) is not None}


def _inherit(group: InstanceGroup, defaults: GroupDefaults, key: str) -> Any:
    own = getattr(group, key)
    return own if own is not None else getattr(defaults, key)


def _merge_api(target: dict[str, Any], extra: Mapping[str, Any], where: str, group: str | None) -> list[Problem]:
    """Add pass-through keys; a key the typed fields already set is ambiguous, so it is refused."""
    clashes = [
        Problem(f"{where}.{key}", "already set by a spec field; set it in one place only", group)
        for key in extra
        if key in target
    ]
    if not clashes:
        target.update(extra)
    return clashes


def render_group(
    group: InstanceGroup, defaults: GroupDefaults, index: int = 0, topology: str = "api"
) -> tuple[dict[str, Any], list[Problem]]:
    out: dict[str, Any] = {"InstanceGroupName": group.name, "InstanceCount": group.count}
    if group.min_count is not None:
        out["MinInstanceCount"] = group.min_count
    for key, api in (
        ("instance_type", "InstanceType"),
        ("execution_role", "ExecutionRole"),
        ("threads_per_core", "ThreadsPerCore"),
        ("training_plan_arn", "TrainingPlanArn"),
        ("image_id", "ImageId"),
    ):
        value = _inherit(group, defaults, key)
        if value is not None:
            out[api] = value
    lifecycle = _inherit(group, defaults, "lifecycle")
    if isinstance(lifecycle, Lifecycle):
        out["LifeCycleConfig"] = _lifecycle(lifecycle)
    ebs = _inherit(group, defaults, "ebs_volume_gb")
    if ebs is not None:
        out["InstanceStorageConfigs"] = [{"EbsVolumeConfig": {"VolumeSizeInGB": ebs}}]
    checks = _inherit(group, defaults, "deep_health_checks")
    if checks is not None:
        out["OnStartDeepHealthChecks"] = list(checks)
    if group.slurm is not None and topology == "api":
        slurm: dict[str, Any] = {"NodeType": group.slurm.node_type}
        names = group.slurm.partition_names()
        if names is not None:
            slurm["PartitionNames"] = names
        out["SlurmConfig"] = slurm
    if group.override_vpc is not None:
        out["OverrideVpcConfig"] = _vpc(group.override_vpc)
    problems = _merge_api(out, group.api, f"instance_groups[{index}].api", group.name)
    return out, problems


def _orchestrator(spec: ClusterSpec) -> dict[str, Any] | None:
    if spec.orchestrator == "eks":
        return {"Eks": {"ClusterArn": spec.eks_cluster_arn}} if spec.eks_cluster_arn else {"Eks": {}}
    slurm: dict[str, Any] = {}
    if spec.slurm_config_strategy is not None:
        slurm["SlurmConfigStrategy"] = spec.slurm_config_strategy
    # Assumption (the guide's examples): API-driven SlurmConfig and Continuous mode go with an explicit
    # Orchestrator.Slurm block (Continuous sends it empty); legacy provisioning_parameters.json clusters
    # send no Orchestrator at all, and HyperPod treats them as Slurm.
    api_driven = spec.topology == "api" and any(g.slurm is not None for g in spec.instance_groups)
    if slurm or api_driven or spec.node_provisioning_mode == "Continuous":
        return {"Slurm": slurm}
    return None


def render_create_request(spec: ClusterSpec) -> dict[str, Any]:
    """The CreateCluster request for ``spec``. Raises SpecError only for spec-level ambiguities
    (an ``api:`` key that a typed field also sets, an EKS spec without its cluster ARN); the HyperPod
    rules are checked separately on the result (``validate_spec``)."""
    problems: list[Problem] = []
    request: dict[str, Any] = {"ClusterName": spec.name}
    groups = []
    for i, g in enumerate(spec.instance_groups):
        rendered, found = render_group(g, spec.defaults, i, spec.topology)
        groups.append(rendered)
        problems.extend(found)
    request["InstanceGroups"] = groups
    if spec.orchestrator == "eks" and not spec.eks_cluster_arn and "Orchestrator" not in spec.api:
        problems.append(Problem("eks_cluster_arn", "required when orchestrator is eks"))
    if spec.orchestrator == "slurm" and spec.eks_cluster_arn:
        problems.append(Problem("eks_cluster_arn", "only allowed when orchestrator is eks"))
    if spec.orchestrator == "eks" and spec.slurm_config_strategy is not None:
        problems.append(Problem("slurm_config_strategy", "only allowed when orchestrator is slurm"))
    if "Orchestrator" in spec.api:
        # A pass-through Orchestrator (e.g. with an AccountingDatabase) replaces the generated one.
        for key in ("eks_cluster_arn", "slurm_config_strategy"):
            if getattr(spec, key) is not None:
                problems.append(Problem(key, "cannot be combined with api.Orchestrator; set it in one place only"))
    else:
        orchestrator = _orchestrator(spec)
        if orchestrator is not None:
            request["Orchestrator"] = orchestrator
    if spec.vpc is not None:
        request["VpcConfig"] = _vpc(spec.vpc)
    if spec.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in spec.tags.items()]
    for key, api in (
        ("node_recovery", "NodeRecovery"),
        ("node_provisioning_mode", "NodeProvisioningMode"),
        ("cluster_role", "ClusterRole"),
    ):
        value = getattr(spec, key)
        if value is not None:
            request[api] = value
    problems.extend(_merge_api(request, spec.api, "api", None))
    if problems:
        raise SpecError(problems)
    return request


# ---------------------------------------------------------------------------------------------------
# The inverse: a request (or a DescribeCluster answer turned into one) back into a spec.

_GROUP_TYPED = {
    "InstanceGroupName", "InstanceCount", "MinInstanceCount", "InstanceType", "ExecutionRole",
    "ThreadsPerCore", "TrainingPlanArn", "ImageId", "LifeCycleConfig", "SlurmConfig", "OverrideVpcConfig",
    "OnStartDeepHealthChecks",
}  # fmt: skip
_CLUSTER_TYPED = {
    "ClusterName", "InstanceGroups", "Orchestrator", "VpcConfig", "Tags", "NodeRecovery",
    "NodeProvisioningMode", "ClusterRole",
}  # fmt: skip


def _single_ebs_size(storage: Any) -> int | None:
    """The size when storage is exactly one plain EBS volume (what ``ebs_volume_gb`` renders)."""
    if isinstance(storage, list) and len(storage) == 1 and isinstance(storage[0], Mapping):
        ebs = storage[0].get("EbsVolumeConfig")
        if set(storage[0]) == {"EbsVolumeConfig"} and isinstance(ebs, Mapping) and set(ebs) == {"VolumeSizeInGB"}:
            size = ebs["VolumeSizeInGB"]
            return size if isinstance(size, int) else None
    return None


def _group_from_request(g: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": g.get("InstanceGroupName"), "count": g.get("InstanceCount")}
    for api, key in (
        ("MinInstanceCount", "min_count"),
        ("InstanceType", "instance_type"),
        ("ExecutionRole", "execution_role"),
        ("ThreadsPerCore", "threads_per_core"),
        ("TrainingPlanArn", "training_plan_arn"),
        ("ImageId", "image_id"),
    ):
        if g.get(api) is not None:
            out[key] = g[api]
    lcc = g.get("LifeCycleConfig")
    if isinstance(lcc, Mapping):
        out["lifecycle"] = {key: lcc[api] for key, api in _LIFECYCLE_KEYS if lcc.get(api) is not None}
    else:
        out["lifecycle"] = AMI
    slurm = g.get("SlurmConfig")
    if isinstance(slurm, Mapping):
        block: dict[str, Any] = {"node_type": slurm.get("NodeType")}
        names = slurm.get("PartitionNames")
        if isinstance(names, list):
            block["partition"] = names[0] if len(names) == 1 else list(names)
        out["slurm"] = block
    vpc = g.get("OverrideVpcConfig")
    if isinstance(vpc, Mapping):
        out["override_vpc"] = {
            "security_group_ids": vpc.get("SecurityGroupIds"),
            "subnets": vpc.get("Subnets"),
        }
    if g.get("OnStartDeepHealthChecks") is not None:
        out["deep_health_checks"] = list(g["OnStartDeepHealthChecks"])
    extra: dict[str, Any] = {k: v for k, v in g.items() if k not in _GROUP_TYPED}
    size = _single_ebs_size(extra.get("InstanceStorageConfigs"))
    if size is not None:
        out["ebs_volume_gb"] = size
        del extra["InstanceStorageConfigs"]
    if extra:
        out["api"] = extra
    return out


def spec_from_request(request: Mapping[str, Any]) -> ClusterSpec:
    """A spec that renders back to ``request`` (every group spelled out in full; no ``defaults``)."""
    from hyperpod_scheduler.cluster.spec import spec_from_dict  # local: keeps the import graph one-way

    data: dict[str, Any] = {"name": request.get("ClusterName")}
    orch = request.get("Orchestrator")
    if isinstance(orch, Mapping) and isinstance(orch.get("Eks"), Mapping):
        data["orchestrator"] = "eks"
        data["eks_cluster_arn"] = orch["Eks"].get("ClusterArn")
    elif isinstance(orch, Mapping) and isinstance(orch.get("Slurm"), Mapping):
        slurm = dict(orch["Slurm"])
        if "SlurmConfigStrategy" in slurm:
            data["slurm_config_strategy"] = slurm.pop("SlurmConfigStrategy")
        if slurm:  # e.g. AccountingDatabase: no typed field, so it passes through whole
            data.setdefault("api", {})["Orchestrator"] = dict(orch)
            data.pop("slurm_config_strategy", None)
    vpc = request.get("VpcConfig")
    if isinstance(vpc, Mapping):
        data["vpc"] = {"security_group_ids": vpc.get("SecurityGroupIds"), "subnets": vpc.get("Subnets")}
    tags = request.get("Tags")
    if isinstance(tags, list):
        data["tags"] = {t.get("Key"): t.get("Value") for t in tags if isinstance(t, Mapping)}
    for api, key in (
        ("NodeRecovery", "node_recovery"),
        ("NodeProvisioningMode", "node_provisioning_mode"),
        ("ClusterRole", "cluster_role"),
    ):
        if request.get(api) is not None:
            data[key] = request[api]
    groups = request.get("InstanceGroups")
    data["instance_groups"] = (
        [_group_from_request(g) for g in groups if isinstance(g, Mapping)] if isinstance(groups, list) else []
    )
    extra = {k: v for k, v in request.items() if k not in _CLUSTER_TYPED}
    if extra:
        data.setdefault("api", {}).update(extra)
    return spec_from_dict(data, source=str(data["name"]))
