"""Approval before release, the shell: ask before a scheduled stop, take a person's answer, and let an
unanswered request lapse at the stop time. The decision at the stop is ``guards.approval``'s.

The token is single-use and expires at the stop: it goes out only in the notification (as a link to the
dashboard's confirm page) and the store keeps its SHA-256, so the fleet deployment's dashboard or any
runner on the same store can check it, and a reader of the store cannot answer for anyone.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote

from hyperpod_scheduler.config.model import Policy
from hyperpod_scheduler.engine.events import Event
from hyperpod_scheduler.engine.planner import effective_hold
from hyperpod_scheduler.engine.runner import ClusterRef, Engine
from hyperpod_scheduler.engine.slurm_roles import stop_roles
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.guards.approval import needs_approval
from hyperpod_scheduler.schedule import Schedule
from hyperpod_scheduler.store.errors import ConflictError
from hyperpod_scheduler.store.records import MAX_APPROVALS, Approval, ClusterRecord, HistoryEntry

if TYPE_CHECKING:
    from hyperpod_scheduler.store.base import StateStore

DEFAULT_APPROVAL_MINUTES = 120.0


class ApprovalError(HyperpodSchedulerError):
    """An answer that cannot be taken: unknown request, wrong token, already answered, or expired."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def link(base: str | None, cluster: str, approval_id: str, token: str) -> str:
    path = f"/clusters/{quote(cluster, safe='')}/approvals/{approval_id}?t={quote(token, safe='')}"
    return (base or "").rstrip("/") + path


def ask_if_due(
    engine: Engine, ref: ClusterRef, schedule: Schedule, policy: Policy, now: datetime, dashboard_url: str | None
) -> Approval | None:
    """Ask for approval of the next scheduled stop when it is within ``approval_minutes`` and releases a
    group that needs it. Once per stop; a DescribeCluster only for clusters with such a policy, in that
    window."""
    if not policy.approve_release or not schedule.allows("stop"):
        return None
    lead = timedelta(minutes=policy.approval_minutes or DEFAULT_APPROVAL_MINUTES)
    upcoming = [t for t in schedule.next_transitions(now - timedelta(seconds=1), 2) if t.state == "stopped"]
    if not upcoming or upcoming[0].at - now > lead:
        return None
    stop_at = upcoming[0].at
    known = engine.accounts.known(ref) or ref
    record = engine.store.get(known.key)
    if record is not None and any(a.transition_at == stop_at for a in record.approvals):
        return None
    if record is not None and effective_hold(record, stop_at) == "running":
        return None  # held running through that stop: nothing will be released, nothing to ask
    if now >= stop_at:
        return None  # too late to ask: the stop keeps the groups (the guard says why)
    known, _ = engine.identify(ref)
    # With the Slurm roles the stop's own guard round sees (remembered, else read from the file).
    read = engine.read_file
    view = stop_roles(engine.describe(known), record, None if read is None else lambda uri: read(known, uri), now)
    groups = needs_approval(view, policy)
    if not groups:
        return None
    text = (
        f"approval needed: the {stop_at:%a %H:%M}Z stop releases {', '.join(groups)} (scarce capacity may not "
        f"come back in the morning). Without an approval by {stop_at:%H:%M}Z they are kept."
    )
    asked = lambda rec: any(a.transition_at == stop_at for a in rec.approvals)  # noqa: E731
    return ask(engine, known, ref.name, "release", groups, stop_at, now, asked, text, {}, dashboard_url)


def ask(
    engine: Engine,
    known: ClusterRef,
    name: str,
    kind: Literal["release", "image"],
    groups: list[str],
    transition_at: datetime,
    now: datetime,
    asked: Callable[[ClusterRecord], bool],
    text: str,
    details: dict[str, object],
    dashboard_url: str | None,
) -> Approval | None:
    """Record a request for ``groups`` at ``transition_at`` (it expires then) with a fresh single-use
    token, unless ``asked`` says the record already holds one, then notify with the link. The one way a
    release or an AMI change is asked for; None when another runner asked first."""
    token = secrets.token_urlsafe(32)
    approval = Approval(
        id=secrets.token_hex(6),
        token_sha256=token_hash(token),
        groups=groups,
        transition_at=transition_at,
        asked_at=now,
        expires_at=transition_at,
        kind=kind,
    )

    def add(rec: ClusterRecord) -> ClusterRecord | None:
        if asked(rec):
            return None  # another runner asked first
        return rec.evolve(approvals=[*rec.approvals, approval][-MAX_APPROVALS:], updated_at=now)

    if not _change(engine.store, known.key, now, add, _line(known, now, engine.actor, "asked", approval)):
        return None
    # The link carries the token: only notification channels see it (never the log or --json output).
    engine.events(
        Event(
            now,
            name,
            "approval",
            text,
            {"approval": approval.id, "groups": approval.groups, "expires": approval.expires_at.isoformat(), **details},
            private=link(dashboard_url, name, approval.id, token),
            where=known.where,
        )
    )
    return approval


def lapse_due(engine: Engine, ref: ClusterRef, now: datetime) -> None:
    """Requests nobody answered by their stop time: a ``lapsed`` line each, once."""
    known = engine.accounts.known(ref) or ref
    record = engine.store.get(known.key)
    if record is None or not any(a.state == "pending" and now >= a.expires_at for a in record.approvals):
        return
    lapsed = [a for a in record.approvals if a.state == "pending" and now >= a.expires_at]
    lines = [_line(known, now, engine.actor, "lapsed", a) for a in lapsed]
    ids = {a.id for a in lapsed}

    def mark(rec: ClusterRecord) -> ClusterRecord | None:
        changed = [a.evolve(state="lapsed") if a.id in ids and a.state == "pending" else a for a in rec.approvals]
        return rec.evolve(approvals=changed, updated_at=now) if changed != rec.approvals else None

    if not _change(engine.store, known.key, now, mark, *lines):
        return
    for a in lapsed:
        engine.events(
            Event(
                now,
                ref.name,
                "approval",
                f"approval {a.id} lapsed: {', '.join(a.groups)} kept",
                {"approval": a.id},
                where=ref.where,
            )
        )


def find(record: ClusterRecord | None, approval_id: str) -> Approval:
    for a in record.approvals if record else []:
        if a.id == approval_id:
            return a
    raise ApprovalError(f"approval {approval_id!r}: no such request for this cluster")


def check(approval: Approval, token: str, now: datetime) -> None:
    """A token that may answer ``approval`` now; otherwise one line saying why not."""
    if not hmac.compare_digest(approval.token_sha256, token_hash(token)):
        raise ApprovalError(f"approval {approval.id}: the token does not match")
    state = approval.state_at(now)
    if state == "lapsed":
        raise ApprovalError(
            f"approval {approval.id}: expired at {approval.expires_at:%a %H:%M}Z (the groups were kept)"
        )
    if state != "pending":
        raise ApprovalError(f"approval {approval.id}: already {state} by {approval.by}; a token answers once")


def decide(
    store: StateStore,
    key: str,
    approval_id: str,
    token: str,
    approve: bool,
    by: str,
    now: datetime,
    actor: str = "dashboard",
) -> Approval:
    """Take a person's answer (single use, before the stop), and write who gave it into the history."""
    who = by.strip() or "someone with the link"
    for _ in range(10):
        record = store.get(key)
        approval = find(record, approval_id)
        check(approval, token, now)
        assert record is not None
        answered = approval.evolve(state="approved" if approve else "refused", by=who[:100], decided_at=now)
        line = HistoryEntry(
            key=key,
            at=now,
            action="approval",
            actor=f"{actor}:{who[:100]}",
            outcome=answered.state,
            detail={"approval": approval.id, "groups": approval.groups, "stop": approval.transition_at},
        )
        changed = [answered if a.id == approval.id else a for a in record.approvals]
        try:
            store.put(record.evolve(approvals=changed, updated_at=now), expected_version=record.version, history=[line])
        except ConflictError:
            continue  # someone else wrote the record: read again (a second answer then fails ``check``)
        return answered
    raise ApprovalError(f"approval {approval_id}: the state store kept changing; try again")


def _line(ref: ClusterRef, now: datetime, actor: str, outcome: str, a: Approval) -> HistoryEntry:
    return HistoryEntry(
        key=ref.key,
        at=now,
        action="approval",
        actor=actor,
        outcome=outcome,
        detail={"approval": a.id, "groups": a.groups, "stop": a.transition_at},
    )


def _change(
    store: StateStore,
    key: str,
    now: datetime,
    change: Callable[[ClusterRecord], ClusterRecord | None],
    *lines: HistoryEntry,
) -> bool:
    for _ in range(10):
        record = store.get(key) or ClusterRecord.new(key, now)
        updated = change(record)
        if updated is None:
            return False
        try:
            store.put(updated, expected_version=record.version if record.version else None, history=list(lines))
            return True
        except ConflictError:
            continue
    return False
