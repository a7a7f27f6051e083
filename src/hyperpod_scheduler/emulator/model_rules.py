"""HyperPod's documented semantic rules for CreateCluster and UpdateCluster, as the emulator reads them.

Sources: the botocore model's member documentation and the HyperPod developer guide (summarised in
the project's facts file). Each rule is one finding with the field it is about; the operations turn
the findings of a request into one ValidationException. This module is the emulator's own reading,
written apart from the product's ``cluster validate`` so that the two can disagree and a test can
notice.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

Finding = tuple[str, str]  # (field, what is wrong), e.g. ("InstanceGroups[1].InstanceType", "... (group gpu)")

# Lifecycle tiers of a Slurm node (guide: "Optional lifecycle configuration").
TIER_AMI = "ami"  # LifeCycleConfig omitted: the HyperPod AMI configures the node
TIER_EXTENSION = "extension"  # SourceS3Uri + OnInitComplete: AMI setup, then the script
TIER_CUSTOM = "custom"  # SourceS3Uri + OnCreate: the scripts do everything

# When updating an existing group these must match what it was created with (guide, UpdateCluster).
IMMUTABLE = ("InstanceType", "ExecutionRole", "ThreadsPerCore")


def lifecycle_tier(spec: Mapping[str, Any]) -> str:
    lcc = spec.get("LifeCycleConfig")
    if not isinstance(lcc, Mapping) or not lcc:
        return TIER_AMI
    return TIER_CUSTOM if lcc.get("OnCreate") else TIER_EXTENSION


def slurm_node_type(spec: Mapping[str, Any]) -> str | None:
    slurm = spec.get("SlurmConfig")
    if isinstance(slurm, Mapping) and isinstance(slurm.get("NodeType"), str):
        return str(slurm["NodeType"])
    return None


def is_eks(request: Mapping[str, Any]) -> bool:
    orchestrator = request.get("Orchestrator")
    return isinstance(orchestrator, Mapping) and "Eks" in orchestrator


def _groups(request: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    groups = request.get("InstanceGroups") or []
    return [(i, g) for i, g in enumerate(groups) if isinstance(g, Mapping)]


def _at(i: int, g: Mapping[str, Any], member: str, what: str) -> Finding:
    return f"InstanceGroups[{i}].{member}", f"{what} (group {g.get('InstanceGroupName')})"


def _instance_type_rules(i: int, g: Mapping[str, Any], required: bool) -> Iterator[Finding]:
    has_type, has_reqs = "InstanceType" in g, "InstanceRequirements" in g
    if has_type and has_reqs:
        # Model docs: "The InstanceType and InstanceRequirements properties are mutually exclusive."
        yield _at(i, g, "InstanceRequirements", "InstanceType and InstanceRequirements are mutually exclusive")
    elif required and not has_type and not has_reqs:
        yield _at(i, g, "InstanceType", "required (or InstanceRequirements)")


def _lifecycle_rules(i: int, g: Mapping[str, Any], eks: bool) -> Iterator[Finding]:
    key = "LifeCycleConfig"
    if key not in g:
        if eks:
            yield _at(i, g, key, "required on EKS clusters (SourceS3Uri and OnCreate); AMI-based setup is Slurm-only")
        return
    lcc = g[key]
    if not isinstance(lcc, Mapping) or not lcc:
        yield _at(i, g, key, "present but empty; omit it entirely for AMI-based configuration")
        return
    on_create, on_init, source = lcc.get("OnCreate"), lcc.get("OnInitComplete"), lcc.get("SourceS3Uri")
    if on_create and on_init:
        yield _at(i, g, key, "OnCreate and OnInitComplete are mutually exclusive")
    elif (on_create or on_init) and not source:
        yield _at(i, g, key, "incomplete: an entry point needs SourceS3Uri")
    elif source and not (on_create or on_init):
        yield _at(i, g, key, "incomplete: SourceS3Uri needs OnCreate or OnInitComplete")
    elif eks and not on_create:
        yield _at(i, g, key, "EKS clusters need OnCreate (OnInitComplete is Slurm-only)")


def _count_rules(i: int, g: Mapping[str, Any]) -> Iterator[Finding]:
    count, minimum = g.get("InstanceCount"), g.get("MinInstanceCount")
    if isinstance(count, int) and isinstance(minimum, int) and minimum > count:
        yield _at(i, g, "MinInstanceCount", f"{minimum} is more than InstanceCount {count}")


def _auto_patch_rules(i: int, g: Mapping[str, Any]) -> Iterator[Finding]:
    patch = g.get("AutoPatchConfig")
    if isinstance(patch, Mapping) and "DrainPolicy" in patch and patch.get("PatchingStrategy") != "DrainFirst":
        # Model docs: DrainPolicy is "Valid only when PatchingStrategy is DrainFirst."
        yield _at(i, g, "AutoPatchConfig.DrainPolicy", "valid only when PatchingStrategy is DrainFirst")


def group_findings(i: int, g: Mapping[str, Any], *, eks: bool, new: bool) -> list[Finding]:
    """Rules about one group on its own (``new``: it is being created, so an instance type is required)."""
    return [
        *_instance_type_rules(i, g, required=new),
        *_lifecycle_rules(i, g, eks),
        *_count_rules(i, g),
        *_auto_patch_rules(i, g),
    ]


def topology_findings(request: Mapping[str, Any]) -> list[Finding]:
    """Whole-cluster rules over the groups as they will be (a CreateCluster-shaped request)."""
    out: list[Finding] = []
    groups = _groups(request)
    names: dict[str, int] = {}
    for i, g in groups:
        name = g.get("InstanceGroupName")
        if isinstance(name, str):
            if name in names:
                out.append((f"InstanceGroups[{i}].InstanceGroupName", f"duplicate instance group name {name}"))
            names.setdefault(name, i)
    eks = is_eks(request)
    continuous = request.get("NodeProvisioningMode") == "Continuous"
    api_slurm = any("SlurmConfig" in g for _, g in groups)
    if eks:
        out.extend(_at(i, g, "SlurmConfig", "not allowed on an EKS cluster") for i, g in groups if "SlurmConfig" in g)
        return out
    if api_slurm:
        types = [(i, g, slurm_node_type(g)) for i, g in groups]
        controllers = [t for t in types if t[2] == "Controller"]
        if len(controllers) != 1:
            out.append(("InstanceGroups", "Cluster must have exactly one InstanceGroup with Controller node type"))
        if len([t for t in types if t[2] == "Login"]) > 1:
            out.append(("InstanceGroups", "Cluster can have at most one InstanceGroup with Login node type"))
        for i, g, node_type in types:
            if "SlurmConfig" not in g:
                continue
            partitions = (g.get("SlurmConfig") or {}).get("PartitionNames") or []
            key = "SlurmConfig.PartitionNames"
            if node_type == "Compute" and len(partitions) != 1:
                out.append(_at(i, g, key, "a Compute group needs exactly one partition name"))
            elif node_type != "Compute" and partitions:
                out.append(_at(i, g, key, f"partitions are only allowed on Compute groups, not {node_type}"))
    elif any("LifeCycleConfig" not in g for _, g in groups):
        # The legacy topology file lives beside the lifecycle scripts: without scripts there is none.
        out.append(("InstanceGroups", "AMI-based configuration (no LifeCycleConfig) needs SlurmConfig on the groups"))
    if continuous:
        slurm = (request.get("Orchestrator") or {}).get("Slurm")
        if isinstance(slurm, Mapping) and "SlurmConfigStrategy" in slurm:
            out.append(("Orchestrator.Slurm.SlurmConfigStrategy", "not supported in Continuous mode (merge only)"))
        if not api_slurm:
            out.append(("InstanceGroups", "Continuous mode on Slurm needs SlurmConfig on the instance groups"))
    return out


def create_findings(request: Mapping[str, Any]) -> list[Finding]:
    eks = is_eks(request)
    out: list[Finding] = []
    if not request.get("InstanceGroups"):
        out.append(("InstanceGroups", "at least one instance group is required"))
    for i, g in _groups(request):
        out.extend(group_findings(i, g, eks=eks, new=True))
    out.extend(topology_findings(request))
    return out


def update_findings(request: Mapping[str, Any], existing: Mapping[str, Mapping[str, Any]], eks: bool) -> list[Finding]:
    """Rules about an UpdateCluster's groups against the groups as they are (``existing``: name -> spec)."""
    out: list[Finding] = []
    for i, g in _groups(request):
        name = g.get("InstanceGroupName")
        old = existing.get(name) if isinstance(name, str) else None
        out.extend(group_findings(i, g, eks=eks, new=old is None))
        if old is None:
            continue
        for key in IMMUTABLE:
            if key in g and key in old and g[key] != old[key]:
                out.append(_at(i, g, key, f"cannot change from {old[key]!r} to {g[key]!r}"))
        if "InstanceRequirements" in g and "InstanceType" in old:
            out.append(_at(i, g, "InstanceRequirements", "cannot replace the group's InstanceType"))
        if "InstanceType" in g and "InstanceRequirements" in old:
            out.append(_at(i, g, "InstanceType", "cannot replace the group's InstanceRequirements"))
        if "SlurmConfig" in g and slurm_node_type(g) != slurm_node_type(old):
            out.append(_at(i, g, "SlurmConfig.NodeType", "NodeType cannot change after creation"))
    return out


def message(findings: list[Finding]) -> str:
    return "; ".join(f"{field}: {what}" for field, what in findings)
