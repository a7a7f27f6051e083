"""The legacy Slurm topology: provisioning_parameters.json, read by custom lifecycle scripts.

With ``topology: provisioning-parameters`` no SlurmConfig is sent; each group's ``slurm:`` role and
partition go into this file instead, which sits beside the lifecycle scripts at SourceS3Uri.
"""

from __future__ import annotations

from typing import Any

from hyperpod_scheduler.cluster.slurm_roles import FILE_NAME
from hyperpod_scheduler.cluster.spec import ClusterSpec
from hyperpod_scheduler.errors import Problem, SpecError

__all__ = ["FILE_NAME", "legacy_problems", "provisioning_parameters"]


def legacy_problems(spec: ClusterSpec) -> list[Problem]:
    """What the file needs from the spec: exactly one controller, at most one login, a partition per worker."""
    if spec.topology != "provisioning-parameters":
        if spec.fsx is not None:
            return [Problem("fsx", "only used with topology: provisioning-parameters (the legacy file carries it)")]
        return []
    problems: list[Problem] = []
    if spec.orchestrator != "slurm":
        problems.append(Problem("topology", "provisioning-parameters is a Slurm topology; the orchestrator is eks"))
    roles: dict[str, list[str]] = {"Controller": [], "Login": [], "Compute": []}
    for i, g in enumerate(spec.instance_groups):
        if g.slurm is None:
            problems.append(
                Problem(
                    f"instance_groups[{i}].slurm",
                    "required with topology: provisioning-parameters "
                    "(the group's role goes into provisioning_parameters.json)",
                    g.name,
                )
            )
            continue
        if g.slurm.node_type not in roles:
            problems.append(
                Problem(
                    f"instance_groups[{i}].slurm.node_type",
                    f"{g.slurm.node_type!r} is not Controller, Login or Compute",
                    g.name,
                )
            )
            continue
        roles[g.slurm.node_type].append(g.name)
        names = g.slurm.partition_names() or []
        if g.slurm.node_type == "Compute" and len(names) != 1:
            problems.append(
                Problem(f"instance_groups[{i}].slurm.partition", "a worker group needs exactly one partition", g.name)
            )
        if g.slurm.node_type != "Compute" and names:
            problems.append(
                Problem(
                    f"instance_groups[{i}].slurm.partition", "partitions are only allowed on Compute groups", g.name
                )
            )
    if len(roles["Controller"]) != 1:
        problems.append(
            Problem(
                "instance_groups[].slurm.node_type",
                f"exactly one Controller group needed, found {roles['Controller'] or 'none'}",
            )
        )
    if len(roles["Login"]) > 1:
        problems.append(
            Problem("instance_groups[].slurm.node_type", f"at most one Login group, found {roles['Login']}")
        )
    return problems


def provisioning_parameters(spec: ClusterSpec) -> dict[str, Any]:
    """The provisioning_parameters.json content for a legacy-topology spec (SpecError if it has none)."""
    if spec.topology != "provisioning-parameters":
        raise SpecError(
            [
                Problem(
                    "topology",
                    "is 'api': this cluster sends SlurmConfig and has no "
                    "provisioning_parameters.json (set topology: provisioning-parameters)",
                )
            ]
        )
    problems = legacy_problems(spec)
    if problems:
        raise SpecError(problems)
    doc: dict[str, Any] = {"version": "1.0.0", "workload_manager": "slurm"}
    workers = []
    for g in spec.instance_groups:
        assert g.slurm is not None
        if g.slurm.node_type == "Controller":
            doc["controller_group"] = g.name
        elif g.slurm.node_type == "Login":
            doc["login_group"] = g.name
        else:
            workers.append({"instance_group_name": g.name, "partition_name": (g.slurm.partition_names() or [""])[0]})
    doc["worker_groups"] = workers
    if spec.fsx is not None:
        doc["fsx_dns_name"] = spec.fsx.dns_name
        doc["fsx_mountname"] = spec.fsx.mount_name
    return doc
