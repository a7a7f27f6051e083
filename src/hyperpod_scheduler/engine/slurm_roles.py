"""The engine's one hook for Slurm roles: a described cluster's groups get their roles from SlurmConfig,
else from the provisioning_parameters.json at their lifecycle source (``cluster.slurm_roles``), else
from the Slurm agent's view (``agent.shape``: the controller's own group, and the groups with Slurm
nodes, read from its latest verdict on the checkpoint channel), so the capacity guard's head logic
works for clusters built from the aws-samples lifecycle scripts too.

The file is read once and remembered in the cluster's record (``SlurmRoles``); it is read again when
the cluster's groups or their lifecycle sources change, and, if it could not be read, after
``RETRY_UNREADABLE``. A file that cannot be read (denied, missing, malformed) leaves those groups'
roles unknown: the capacity guard then keeps them with any compute that stays (any may be the
controller), and the note says why. The agent's view is asked only for those groups, and what it
names is remembered with the file's reading (and dropped when the file is read again). An agent that
says nothing (older than the field, or no verdict yet) changes nothing. EKS clusters have no Slurm
head: nothing is read.

``read_s3_file`` is the edge (one bounded s3:GetObject); ``resolve_roles`` is pure given its reader.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.cluster.slurm_roles import (
    FILE_NAME,
    LIMITS,
    Role,
    combine,
    distinct,
    file_uri,
    needing_roles,
    parse_parameters,
)
from hyperpod_scheduler.cluster.view import ClusterView, GroupView
from hyperpod_scheduler.inputs import bounded
from hyperpod_scheduler.inputs.bounded import BadDocument
from hyperpod_scheduler.store.errors import ConflictError
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry, SlurmRoles

if TYPE_CHECKING:
    from hyperpod_scheduler.agent.messages import SlurmShape
    from hyperpod_scheduler.store.base import StateStore

RETRY_UNREADABLE = timedelta(hours=1)
MAX_SOURCES = 10  # distinct lifecycle sources read for one cluster (real clusters have one or two)
ReadFile = Callable[[str], bytes]
ReadShape = Callable[[], "SlurmShape | None"]
AGENT_SOURCE = "the Slurm agent"  # ``GroupView.role_source`` of a role the agent's view gave


class FileUnreadable(Exception):
    """The file could not be fetched; the message is the one-line reason."""


@dataclass(frozen=True)
class Resolved:
    view: ClusterView  # with roles applied
    record_change: SlurmRoles | None  # what to remember (None: nothing new was read)
    note: str | None  # what to tell the user, if anything


def lifecycle_source(g: GroupView) -> str:
    lifecycle = g.details.get("LifeCycleConfig")
    uri = lifecycle.get("SourceS3Uri") if isinstance(lifecycle, Mapping) else None
    return uri if isinstance(uri, str) else ""


def _fits(remembered: SlurmRoles, sources: Mapping[str, str], now: datetime) -> bool:
    if dict(remembered.sources) != dict(sources):
        return False  # a group added, removed or moved to another lifecycle source: read again
    return not remembered.unknown or now - remembered.read_at < RETRY_UNREADABLE


def _read(read: ReadFile | None, uri: str) -> Mapping[str, Role] | str:
    """The roles the file at ``uri`` gives, or the one-line reason it could not be read."""
    if not uri.startswith("s3://"):
        return f"the lifecycle source of {uri} is not an s3:// prefix, so {FILE_NAME} cannot be read"
    if read is None:
        return f"{uri} was not read: this engine has no S3 reader"
    try:
        return parse_parameters(read(uri), uri)
    except (FileUnreadable, BadDocument) as exc:
        return str(exc)
    except Exception as exc:  # whatever went wrong, the safe reading is "unknown": the head is kept
        return f"{uri}: {type(exc).__name__}: {exc}"


def remembered_roles(view: ClusterView, record: ClusterRecord | None, now: datetime) -> ClusterView:
    """``view`` with the roles the record remembers (read from provisioning_parameters.json by an
    earlier turn), when they still fit the cluster; reads nothing. For the faces (plan, status), so a
    cluster without SlurmConfig gets the same head warning and protections as the engine's turn."""
    remembered = record.slurm_roles if record is not None else None
    if view.eks or remembered is None or not needing_roles({g.name: g.node_type for g in view.groups}):
        return view
    if not _fits(remembered, {g.name: lifecycle_source(g) for g in view.groups}, now):
        return view
    return _applied(view, remembered.roles, remembered.unknown, remembered.agent)


def _applied(
    view: ClusterView, roles: Mapping[str, str], unknown: Mapping[str, str], agent: Mapping[str, str]
) -> ClusterView:
    """The file's roles first, then the agent's for the groups the file left unknown."""
    left = {g: why for g, why in unknown.items() if g not in agent}
    return view.with_roles(roles, left).with_roles(agent, {}, source=AGENT_SOURCE)


def _from_agent(view: ClusterView, unknown: Mapping[str, str], shape: ReadShape | None) -> tuple[dict[str, Role], str]:
    """The roles the agent's view gives the ``unknown`` groups, and why it gave none (or "")."""
    if shape is None or not unknown:
        return {}, ""
    try:
        seen = shape()
    except Exception as exc:  # a channel that cannot be read: the roles stay unknown, the head kept
        return {}, f"the Slurm agent's view could not be read ({type(exc).__name__}: {exc})"
    if seen is None:
        return {}, "the Slurm agent has reported no view of the cluster"
    if seen.cluster_arn is not None and seen.cluster_arn != view.arn:
        return {}, f"the Slurm agent's view is of {seen.cluster_arn}, not this cluster"
    if view.group(seen.controller) is None:
        return {}, f"the Slurm agent names a controller group '{seen.controller}' this cluster does not have"
    roles: dict[str, Role] = {}
    for g in unknown:
        if g == seen.controller:
            roles[g] = "Controller"
        elif g in seen.compute:
            roles[g] = "Compute"
    return roles, "" if roles else "the Slurm agent's view names none of these groups"


def stop_roles(
    view: ClusterView,
    record: ClusterRecord | None,
    read: ReadFile | None,
    now: datetime,
    shape: ReadShape | None = None,
) -> ClusterView:
    """``view`` with the roles the stop itself uses (``resolve_roles``: remembered while they fit, else
    the file read, else the agent's view), remembering nothing: for what is decided ahead of a stop (its
    approval, its AMI move, every face's forecast), so a cluster never stopped is seen as its first stop
    will see it."""
    return resolve_roles(view, record, read, now, shape).view


def resolve_roles(
    view: ClusterView,
    record: ClusterRecord | None,
    read: ReadFile | None,
    now: datetime,
    shape: ReadShape | None = None,
) -> Resolved:
    """``view`` with every group's Slurm role it can learn, what to remember, and the note to give.
    ``shape``: the Slurm agent's latest view, asked only when the file leaves a group unknown."""
    slurm_config = {g.name: g.node_type for g in view.groups}
    needing = needing_roles(slurm_config)
    if view.eks or not needing:
        return Resolved(view, None, None)
    sources = {g.name: lifecycle_source(g) for g in view.groups}
    remembered = record.slurm_roles if record is not None else None
    change: SlurmRoles | None = None
    if remembered is not None and _fits(remembered, sources, now):
        roles: Mapping[str, str] = remembered.roles
        unknown: Mapping[str, str] = remembered.unknown
        agent: Mapping[str, str] = remembered.agent
    else:
        files = {g: file_uri(sources[g]) for g in needing if sources[g]}
        uris = distinct(files.values())
        found: dict[str, Mapping[str, Role] | str] = {u: _read(read, u) for u in uris[:MAX_SOURCES]}
        for u in uris[MAX_SOURCES:]:
            found[u] = f"{u} was not read: more than {MAX_SOURCES} lifecycle sources"
        roles, unknown = combine({g: None for g in needing}, found, files)
        # Every group asked about had no SlurmConfig, so each role found came from a file: a ``Role``.
        learned = cast(dict[str, Role], roles)
        change = SlurmRoles(roles=learned, unknown=dict(unknown), sources=sources, read_at=now)
        agent = {}
    fresh = change is not None  # the file was read this turn (else its reading was remembered)
    left = {g: why for g, why in unknown.items() if g not in agent}
    told, silent = _from_agent(view, left, shape)
    base = change if change is not None else remembered
    if told and base is not None:
        change = base.evolve(agent={**base.agent, **told}, agent_seen_at=now)
        agent = change.agent
        left = {g: why for g, why in left.items() if g not in told}
    if silent:
        left = {g: f"{why}; {silent}" for g, why in left.items()}
    resolved = _applied(view, roles, left, agent)
    return Resolved(resolved, change, _note(resolved, left, fresh, bool(told)))


def _note(view: ClusterView, unknown: Mapping[str, str], fresh: bool, told: bool) -> str | None:
    """One line: the roles learned this turn and from where (the file, the agent), and why any is unknown."""
    parts = []
    for source, learned in ((FILE_NAME, fresh), (AGENT_SOURCE, told)):
        said = ", ".join(f"'{g.name}' {g.node_type}" for g in view.groups if g.role_source == source)
        if learned and said:
            parts.append(f"Slurm roles from {source}: {said}")
    if unknown:
        reasons = "; ".join(distinct(unknown.values()))
        names = ", ".join(f"'{g}'" for g in unknown)
        parts.append(
            f"Slurm roles unknown: {reasons}; {names} kept with any compute kept (one may be the Slurm controller)"
        )
    return "; ".join(parts) or None  # remembered and complete: said when it was read


def remember_roles(
    store: StateStore,
    key: str,
    record: ClusterRecord | None,
    resolved: Resolved,
    entry: Callable[..., HistoryEntry],
) -> ClusterRecord | None:
    """Store what ``resolved`` read, with a history line saying it (``entry``: the engine's line maker,
    given action, outcome and detail). On a conflict nothing is stored and the file is read again next time."""
    change = resolved.record_change
    if change is None:
        return record
    unknown = {g: why for g, why in change.unknown.items() if g not in change.agent}
    line = entry(
        "slurm-roles",
        "unknown" if unknown else "read",
        reason=resolved.note or "",
        roles=dict(change.roles),
        unknown=unknown,
        **({"agent": dict(change.agent)} if change.agent else {}),
    )
    base = record or ClusterRecord.new(key, change.read_at)
    with contextlib.suppress(ConflictError):
        return store.put(
            base.evolve(slurm_roles=change, updated_at=change.read_at),
            expected_version=record.version if record is not None else None,
            history=[line],
        )
    return record


def read_s3_file(s3: Any, uri: str) -> bytes:
    """One bounded s3:GetObject of ``uri`` (``s3://bucket/key``); ``FileUnreadable`` says why not."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    if not bucket or not key:
        raise FileUnreadable(f"{uri} is not an s3://bucket/key address")
    try:
        answer = s3.get_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise FileUnreadable(f"{uri}: {err.get('Code', '?')} ({err.get('Message', '')})") from None
    except BotoCoreError as exc:
        raise FileUnreadable(f"{uri}: {exc}") from None
    body = answer["Body"]
    try:
        return bounded.read_stream(body, uri, LIMITS)
    except BotoCoreError as exc:
        raise FileUnreadable(f"{uri}: {exc}") from None
    finally:
        with contextlib.suppress(Exception):
            body.close()
