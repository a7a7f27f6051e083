"""A cluster's Slurm roles from its real shape: SlurmConfig where a group has one, else the legacy
``provisioning_parameters.json`` beside the lifecycle scripts at the group's ``SourceS3Uri``.

Most clusters built from the aws-samples lifecycle scripts have no SlurmConfig at all: the scripts on
each node read this file to learn which group is the controller, which the login node and which the
workers (format: hyperpod-facts.md, "Slurm topology"). Without it the capacity guard cannot tell the
head from a worker and a stop that keeps P5 compute would zero the controller (issue 26, case 3).

Pure: the bytes come from the edge (``engine.slurm_roles``); every bad field is a one-line
``BadDocument`` naming the file, the field and the value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from hyperpod_scheduler.inputs import bounded
from hyperpod_scheduler.inputs.bounded import BadDocument, Limits

__all__ = ["FILE_NAME", "LIMITS", "Role", "combine", "file_uri", "parse_parameters"]

FILE_NAME = "provisioning_parameters.json"
Role = Literal["Controller", "Login", "Compute"]
# The real file is a few hundred bytes; anything near this is not one (and is refused unread).
LIMITS = Limits(max_bytes=64 * 1024, max_depth=8, max_aliases=0, max_nodes=10_000)
_MAX_WORKER_GROUPS = 100  # a cluster has at most 100 instance groups


def file_uri(source_uri: str) -> str:
    """Where the file sits for a lifecycle source: ``s3://b/lc/`` -> ``s3://b/lc/provisioning_parameters.json``."""
    return source_uri.rstrip("/") + "/" + FILE_NAME


def _name(doc: Mapping[str, Any], key: str, source: str, *, required: bool) -> str | None:
    value = doc.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadDocument(source, f"{key} is {value!r}, expected an instance group name")
    return value


def parse_parameters(data: bytes | str, source: str) -> dict[str, Role]:
    """The roles a provisioning_parameters.json gives, by group name; ``BadDocument`` on anything wrong."""
    doc = bounded.load_json(data, source, LIMITS)
    if not isinstance(doc, dict):
        raise BadDocument(source, f"is a JSON {type(doc).__name__}, expected an object")
    version = doc.get("version")
    if version is not None and not isinstance(version, str):
        raise BadDocument(source, f"version is {version!r}, expected a string such as '1.0.0'")
    manager = doc.get("workload_manager")
    if manager is not None and manager != "slurm":
        raise BadDocument(source, f"workload_manager is {manager!r}, expected 'slurm'")
    roles: dict[str, Role] = {}

    def assign(group: str, role: Role, where: str) -> None:
        if roles.get(group, role) != role:
            raise BadDocument(source, f"{where} names group '{group}', already the {roles[group]} group")
        roles[group] = role

    controller = _name(doc, "controller_group", source, required=True)
    assert controller is not None
    assign(controller, "Controller", "controller_group")
    login = _name(doc, "login_group", source, required=False)
    if login is not None:
        assign(login, "Login", "login_group")
    workers = doc.get("worker_groups", [])
    if not isinstance(workers, list) or len(workers) > _MAX_WORKER_GROUPS:
        raise BadDocument(source, f"worker_groups is {workers!r:.80}, expected a list of at most 100 groups")
    for i, worker in enumerate(workers):
        where = f"worker_groups[{i}]"
        if not isinstance(worker, dict):
            raise BadDocument(source, f"{where} is {worker!r:.80}, expected an object")
        name = worker.get("instance_group_name")
        if not isinstance(name, str) or not name.strip():
            raise BadDocument(source, f"{where}.instance_group_name is {name!r}, expected an instance group name")
        partition = worker.get("partition_name")
        if partition is not None and not isinstance(partition, str):
            raise BadDocument(source, f"{where}.partition_name is {partition!r}, expected a partition name")
        assign(name, "Compute", f"{where}.instance_group_name")
    return roles


def combine(
    slurm_config: Mapping[str, str | None],
    from_files: Mapping[str, Mapping[str, Role] | str],
    sources: Mapping[str, str],
) -> tuple[dict[str, str], dict[str, str]]:
    """Each group's role, and why it is unknown for the groups that have none.

    ``slurm_config``: group -> its SlurmConfig NodeType (None without one), which always wins.
    ``from_files``: per file URI, the roles it gives or why it could not be read; ``sources``: group ->
    the file URI at its lifecycle source (absent: it has none). A group takes its role from the file its
    own nodes' lifecycle scripts read."""
    roles: dict[str, str] = {}
    unknown: dict[str, str] = {}
    for group, node_type in slurm_config.items():
        if node_type is not None:
            roles[group] = node_type
            continue
        uri = sources.get(group)
        if uri is None:
            unknown[group] = f"group '{group}' has no SlurmConfig and no lifecycle source to read {FILE_NAME} from"
        else:
            found = from_files.get(uri, f"{uri} was not read")
            if isinstance(found, str):
                unknown[group] = found
            elif group in found:
                roles[group] = found[group]
            else:
                unknown[group] = f"{uri} does not name group '{group}'"
    return roles, unknown


def needing_roles(slurm_config: Mapping[str, str | None]) -> list[str]:
    """The groups SlurmConfig gives no role (in order)."""
    return [g for g, t in slurm_config.items() if t is None]


def distinct(values: Iterable[str]) -> list[str]:
    out: list[str] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out
