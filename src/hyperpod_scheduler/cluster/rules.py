"""The documented semantic rules of HyperPod cluster requests, beyond what the service model checks.

Shared by ``cluster validate`` and the emulator, so a spec that validates locally is accepted by the
emulator and vice versa. Every rule returns ``Problem`` values naming the group and the API field.
Rules never raise on malformed input: they skip what they cannot read (the model check reports it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from hyperpod_scheduler.aws.model import validate_request
from hyperpod_scheduler.errors import Problem

MAX_INSTANCE_COUNT = 6758
RECOMMENDED_BUCKET_PREFIX = "s3://sagemaker-"


def _groups(request: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    groups = request.get("InstanceGroups")
    if not isinstance(groups, list):
        return []
    return [(i, g) for i, g in enumerate(groups) if isinstance(g, Mapping)]


def _name(group: Mapping[str, Any]) -> str | None:
    name = group.get("InstanceGroupName")
    return name if isinstance(name, str) else None


def orchestrator_of(request: Mapping[str, Any]) -> str:
    """``eks`` or ``slurm``; HyperPod clusters without an Orchestrator block are Slurm clusters."""
    orch = request.get("Orchestrator")
    if isinstance(orch, Mapping) and "Eks" in orch:
        return "eks"
    return "slurm"


def is_continuous(request: Mapping[str, Any]) -> bool:
    return request.get("NodeProvisioningMode") == "Continuous"


def node_type(group: Mapping[str, Any]) -> str | None:
    slurm = group.get("SlurmConfig")
    if isinstance(slurm, Mapping) and isinstance(slurm.get("NodeType"), str):
        return str(slurm["NodeType"])
    return None


def uses_api_slurm_topology(request: Mapping[str, Any]) -> bool:
    return any(isinstance(g.get("SlurmConfig"), Mapping) for _, g in _groups(request))


def _lifecycle_rules(i: int, group: Mapping[str, Any], orchestrator: str) -> Iterator[Problem]:
    name = _name(group)
    field = f"InstanceGroups[{i}].LifeCycleConfig"
    if "LifeCycleConfig" not in group:
        if orchestrator == "eks":
            yield Problem(field, "EKS clusters need a LifeCycleConfig with SourceS3Uri and OnCreate", name)
        return
    lcc = group["LifeCycleConfig"]
    if not isinstance(lcc, Mapping):
        return
    if not any(lcc.get(k) for k in ("SourceS3Uri", "OnCreate", "OnInitComplete")):
        yield Problem(field, "the LifeCycleConfig block is empty; omit it for AMI-based configuration", name)
        return
    uri, on_create, on_init = lcc.get("SourceS3Uri"), lcc.get("OnCreate"), lcc.get("OnInitComplete")
    if on_create and on_init:
        yield Problem(f"{field}.OnCreate", "OnCreate and OnInitComplete are mutually exclusive", name)
    if (on_create or on_init) and not uri:
        entry = "OnCreate" if on_create else "OnInitComplete"
        yield Problem(f"{field}.SourceS3Uri", f"incomplete: {entry} is set but SourceS3Uri is missing", name)
    if uri and not (on_create or on_init):
        yield Problem(
            f"{field}.OnCreate",
            "incomplete: SourceS3Uri is set but neither OnCreate nor OnInitComplete",
            name,
        )
    if orchestrator == "eks" and not on_create:
        yield Problem(f"{field}.OnCreate", "EKS clusters need OnCreate (optional lifecycle is Slurm-only)", name)
    if isinstance(uri, str) and uri and not uri.startswith(RECOMMENDED_BUCKET_PREFIX):
        yield Problem(
            f"{field}.SourceS3Uri",
            f"{uri!r} does not start with {RECOMMENDED_BUCKET_PREFIX!r}; the managed instance role "
            "policy only reads buckets with that prefix",
            name,
            "warning",
        )


def _count_rules(i: int, group: Mapping[str, Any]) -> Iterator[Problem]:
    name = _name(group)
    for key in ("InstanceCount", "MinInstanceCount"):
        value = group.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= MAX_INSTANCE_COUNT:
            yield Problem(f"InstanceGroups[{i}].{key}", f"{value} is out of range 0..{MAX_INSTANCE_COUNT}", name)
    count, minimum = group.get("InstanceCount"), group.get("MinInstanceCount")
    if isinstance(count, int) and isinstance(minimum, int) and minimum > count:
        yield Problem(
            f"InstanceGroups[{i}].MinInstanceCount",
            f"MinInstanceCount {minimum} is greater than InstanceCount {count}",
            name,
        )


def _slurm_topology_rules(request: Mapping[str, Any]) -> Iterator[Problem]:
    groups = _groups(request)
    with_config = [(i, g) for i, g in groups if isinstance(g.get("SlurmConfig"), Mapping)]
    if not with_config:
        # Legacy topology: provisioning_parameters.json sits beside the lifecycle scripts.
        for i, g in groups:
            if "LifeCycleConfig" not in g:
                yield Problem(
                    f"InstanceGroups[{i}].LifeCycleConfig",
                    "without SlurmConfig the Slurm topology comes from provisioning_parameters.json "
                    "beside the lifecycle scripts, so a LifeCycleConfig is required "
                    "(or give every group a SlurmConfig)",
                    _name(g),
                )
        return
    for i, g in groups:
        if not isinstance(g.get("SlurmConfig"), Mapping):
            yield Problem(
                f"InstanceGroups[{i}].SlurmConfig",
                "missing: when any group has SlurmConfig, every group needs one",
                _name(g),
            )
    by_type: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    for i, g in with_config:
        by_type.setdefault(node_type(g) or "", []).append((i, g))
    controllers = by_type.get("Controller", [])
    if len(controllers) != 1:
        names = ", ".join(repr(_name(g)) for _, g in controllers) or "none"
        yield Problem(
            "InstanceGroups[].SlurmConfig.NodeType",
            f"the cluster must have exactly one group with NodeType Controller (found {names})",
        )
    logins = by_type.get("Login", [])
    if len(logins) > 1:
        for i, g in logins[1:]:
            yield Problem(
                f"InstanceGroups[{i}].SlurmConfig.NodeType",
                "at most one group may have NodeType Login",
                _name(g),
            )
    for i, g in with_config:
        slurm = g["SlurmConfig"]
        partitions = slurm.get("PartitionNames")
        field = f"InstanceGroups[{i}].SlurmConfig.PartitionNames"
        if node_type(g) == "Compute":
            if not partitions:
                yield Problem(field, "required on Compute groups (one partition name)", _name(g))
            elif isinstance(partitions, list) and len(partitions) > 1:
                yield Problem(field, f"exactly one partition name allowed, got {len(partitions)}", _name(g))
        elif partitions:
            yield Problem(field, f"partitions are only allowed on Compute groups, not {node_type(g)}", _name(g))


def _continuous_rules(request: Mapping[str, Any]) -> Iterator[Problem]:
    if not is_continuous(request) or orchestrator_of(request) != "slurm":
        return
    if not uses_api_slurm_topology(request):
        yield Problem(
            "NodeProvisioningMode",
            "Continuous mode on Slurm requires API-driven SlurmConfig on every group, not provisioning_parameters.json",
        )
    orch = request.get("Orchestrator")
    slurm = orch.get("Slurm") if isinstance(orch, Mapping) else None
    if isinstance(slurm, Mapping) and "SlurmConfigStrategy" in slurm:
        yield Problem(
            "Orchestrator.Slurm.SlurmConfigStrategy",
            "must not be sent in Continuous mode (it runs in merge mode only)",
        )
    for i, g in _groups(request):
        if node_type(g) == "Controller" and g.get("MinInstanceCount") == 0:
            yield Problem(
                f"InstanceGroups[{i}].MinInstanceCount",
                "the controller has MinInstanceCount 0 in Continuous mode: the cluster can be InService "
                "without a Slurm controller",
                _name(g),
                "warning",
            )


def _style_warnings(request: Mapping[str, Any]) -> Iterator[Problem]:
    if orchestrator_of(request) != "slurm" or not uses_api_slurm_topology(request):
        return
    for i, g in _groups(request):
        lcc = g.get("LifeCycleConfig")
        if isinstance(lcc, Mapping) and lcc.get("OnCreate") and not lcc.get("OnInitComplete"):
            yield Problem(
                f"InstanceGroups[{i}].LifeCycleConfig.OnCreate",
                "custom tier (OnCreate) with API-driven SlurmConfig: AMI-based configuration, or an "
                "OnInitComplete extension script, would do and skips maintaining Slurm setup scripts",
                _name(g),
                "warning",
            )


def check_semantics(request: Mapping[str, Any]) -> list[Problem]:
    """The documented semantic rules for a CreateCluster request (errors and warnings)."""
    problems: list[Problem] = []
    orchestrator = orchestrator_of(request)
    groups = _groups(request)
    counts = Counter(_name(g) for _, g in groups if _name(g))
    for name, n in counts.items():
        if n > 1:
            first = next(i for i, g in groups if _name(g) == name)
            problems.append(
                Problem(f"InstanceGroups[{first}].InstanceGroupName", f"duplicate group name ({n} groups)", name)
            )
    for i, g in groups:
        problems.extend(_lifecycle_rules(i, g, orchestrator))
        problems.extend(_count_rules(i, g))
        if orchestrator == "eks" and "SlurmConfig" in g:
            problems.append(Problem(f"InstanceGroups[{i}].SlurmConfig", "not allowed on an EKS cluster", _name(g)))
    if orchestrator == "slurm" and groups:
        problems.extend(_slurm_topology_rules(request))
    problems.extend(_continuous_rules(request))
    problems.extend(_style_warnings(request))
    return problems


def check_create_request(request: Mapping[str, Any]) -> list[Problem]:
    """Model validation plus semantic rules for a CreateCluster request."""
    problems = validate_request("CreateCluster", request)
    if not request.get("InstanceGroups"):
        problems.append(Problem("InstanceGroups", "at least one instance group is required"))
    return problems + check_semantics(request)


_IMMUTABLE = ("InstanceType", "ExecutionRole", "ThreadsPerCore")


def check_update_request(
    request: Mapping[str, Any],
    existing_groups: Sequence[Mapping[str, Any]],
    existing_request: Mapping[str, Any],
) -> list[Problem]:
    """Model validation plus the rules for changing existing groups in an UpdateCluster request.

    ``existing_groups`` are the groups as DescribeCluster reports them; ``existing_request`` is the
    cluster's current configuration in request form (for cluster-wide settings such as the orchestrator).
    """
    problems = validate_request("UpdateCluster", request)
    current = {g.get("InstanceGroupName"): g for g in existing_groups}
    for i, g in _groups(request):
        name = _name(g)
        old = current.get(name)
        if old is None:
            continue
        for key in _IMMUTABLE:
            new_value, old_value = g.get(key), old.get(key)
            if key == "ThreadsPerCore" and new_value is None:
                continue
            if new_value != old_value:
                problems.append(
                    Problem(
                        f"InstanceGroups[{i}].{key}",
                        f"cannot change on an existing group ({old_value!r} -> {new_value!r})",
                        name,
                    )
                )
        if node_type(g) is not None and node_type(old) is not None and node_type(g) != node_type(old):
            problems.append(
                Problem(
                    f"InstanceGroups[{i}].SlurmConfig.NodeType",
                    f"NodeType cannot change after creation ({node_type(old)} -> {node_type(g)})",
                    name,
                )
            )
    merged = dict(existing_request)
    by_name = {_name(g): dict(g) for _, g in _groups(existing_request)}
    for _, g in _groups(request):
        by_name[_name(g)] = dict(g)
    deleted = request.get("InstanceGroupsToDelete") or []
    merged["InstanceGroups"] = [g for n, g in by_name.items() if n not in deleted]
    if not merged["InstanceGroups"]:
        problems.append(Problem("InstanceGroupsToDelete", "the cluster must keep at least one instance group"))
    for key in ("NodeProvisioningMode", "Orchestrator", "NodeRecovery"):
        if key in request:
            merged[key] = request[key]
    problems.extend(p for p in check_semantics(merged) if p.severity == "error" and p not in problems)
    return problems
