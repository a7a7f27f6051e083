"""The status of each cluster, as the CLI's ``status`` and the dashboard's fleet page both show it.

One builder, one price source (the context's): a figure cannot differ between the two faces.
Nothing here calls AWS: a status row is the record, the schedule and the clock.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.cost.savings import keep_cost_per_night
from hyperpod_scheduler.engine.fleet import Governed, next_transition
from hyperpod_scheduler.engine.planner import effective_hold
from hyperpod_scheduler.schedule import Schedule
from hyperpod_scheduler.store.records import (
    AmiChange,
    Approval,
    ClusterRecord,
    GroupOutcome,
    Hold,
    PlanWatch,
    Refusal,
    RetryState,
)

NOT_GOVERNED = "(not governed)"
# Records the agent channel keeps in a shared store: they are messages, not clusters.
AGENT_KEY_PREFIX = "agent/"


@dataclass(frozen=True)
class KeptGroup:
    """A group the last stop left running (protected capacity, ``keep``, a floor), and its nightly cost."""

    group: str
    kept: int
    instance_type: str | None
    keep_cost_per_night_usd: float | None


@dataclass(frozen=True)
class StatusRow:
    key: str
    cluster: str
    region: str | None
    schedule: str  # the schedule's label, or NOT_GOVERNED
    schedule_expression: str | None
    state: str  # running | stopped | stopping | starting | unknown
    hold: Hold | None  # only a hold in force now
    recorded_sizes: Mapping[str, int]
    next_transition: tuple[datetime, str] | None  # (at, state)
    protected: tuple[KeptGroup, ...]
    last_outcomes: tuple[GroupOutcome, ...]
    retry: RetryState | None
    refused: Refusal | None = None  # the last stop or start the engine would not send, and why
    ami_changes: tuple[AmiChange, ...] = ()  # groups the last start brought back on another AMI
    approval: Approval | None = None  # the latest request to approve a release (its token's hash never shown)
    plans: tuple[PlanWatch, ...] = ()  # training plans the cluster's groups run on, as last read

    @property
    def governed(self) -> bool:
        return self.schedule != NOT_GOVERNED

    def document(self) -> dict[str, Any]:
        """The row as JSON (``status --json`` and ``/api/fleet``)."""
        nxt = self.next_transition
        return {
            "key": self.key,
            "cluster": self.cluster,
            "region": self.region,
            "schedule": self.schedule,
            "schedule_expression": self.schedule_expression,
            "state": self.state,
            "hold": None if self.hold is None else self.hold.model_dump(mode="json"),
            "recorded_sizes": dict(self.recorded_sizes),
            "next_transition": {"at": nxt[0].isoformat(), "state": nxt[1]} if nxt else None,
            "protected": [
                {
                    "group": p.group,
                    "kept": p.kept,
                    "instance_type": p.instance_type,
                    "keep_cost_per_night_usd": p.keep_cost_per_night_usd,
                }
                for p in self.protected
            ],
            "last_outcomes": [o.model_dump(mode="json") for o in self.last_outcomes],
            "retry": None if self.retry is None else self.retry.model_dump(mode="json"),
            "refused": None if self.refused is None else self.refused.model_dump(mode="json"),
            "ami_changes": [c.model_dump(mode="json") for c in self.ami_changes],
            "approval": None
            if self.approval is None
            else {
                "id": self.approval.id,
                "groups": list(self.approval.groups),
                "stop": self.approval.transition_at.isoformat(),
                "expires": self.approval.expires_at.isoformat(),
                "state": self.approval.state,
                "by": self.approval.by,
            },
            "training_plans": [
                {
                    "plan": p.arn,
                    "groups": list(p.groups),
                    "status": p.status,
                    "ends": p.end.isoformat() if p.end else None,
                    "total": p.total,
                    "in_use": p.in_use,
                    "warned_days": list(p.warned),
                }
                for p in self.plans
            ],
        }


def fleet_status(ctx: Context, *, ungoverned: bool = True) -> list[StatusRow]:
    """Every governed cluster, then (with ``ungoverned``) every other cluster the store remembers
    (a manual stop of a cluster outside the config)."""
    rows = [status_row(ctx, g) for g in ctx.fleet().governed()]
    if ungoverned:
        known = {r.key for r in rows}
        for key in ctx.store.list_keys():
            if key not in known and not key.startswith(AGENT_KEY_PREFIX):
                old = ctx.store.get(key)
                if old is not None and old.moved_to is not None:
                    continue  # from before account keys, shown under its account's key
                rows.append(status_row(ctx, None, key))
    return rows


def status_row(ctx: Context, g: Governed | None, key: str | None = None) -> StatusRow:
    """The row of governed cluster ``g``, or of the remembered ``key`` when it is not governed."""
    record_key = g.ref.key if g is not None else key or ""
    record = ctx.store.get(record_key)
    now = ctx.now()
    return StatusRow(
        key=record_key,
        cluster=g.ref.name if g is not None else record_key.rsplit("/", 1)[-1],
        region=g.ref.region if g is not None else None,
        schedule=g.schedule_label if g is not None else NOT_GOVERNED,
        schedule_expression=g.schedule.expression if g is not None else None,
        state=_state(record),
        hold=record.hold if record is not None and effective_hold(record, now) else None,
        recorded_sizes={n: s.count for n, s in record.snapshot.sizes.items()} if record and record.snapshot else {},
        next_transition=next_transition(g.schedule, now) if g is not None else None,
        protected=_kept(ctx, record, g.schedule if g is not None else None, now),
        last_outcomes=tuple(record.last_outcomes) if record else (),
        retry=record.retry if record else None,
        refused=record.refused if record else None,
        ami_changes=tuple(record.ami_changes) if record else (),
        approval=_latest_approval(record, now),
        plans=tuple(record.plans.values()) if record else (),
    )


def _latest_approval(record: ClusterRecord | None, now: datetime) -> Approval | None:
    if record is None or not record.approvals:
        return None
    latest = record.approvals[-1]
    return latest.evolve(state=latest.state_at(now))


def _state(record: ClusterRecord | None) -> str:
    if record is not None and record.pending is not None:
        return "stopping" if record.pending.action == "stop" else "starting"
    return record.applied_state if record is not None and record.applied_state else "unknown"


def _kept(
    ctx: Context, record: ClusterRecord | None, schedule: Schedule | None, now: datetime
) -> tuple[KeptGroup, ...]:
    if record is None or record.snapshot is None:
        return ()
    hours = night_hours(schedule, now) if schedule is not None else 0.0
    out = []
    for group, count in record.snapshot.kept.items():
        size = record.snapshot.sizes.get(group)
        itype = size.instance_type if size is not None else None
        cost = keep_cost_per_night(itype, count, hours, ctx.prices()) if itype and hours else None
        out.append(KeptGroup(group, count, itype, None if cost is None else round(cost, 2)))
    return tuple(out)


def night_hours(schedule: Schedule, now: datetime) -> float:
    """Length of the next stopped stretch (stop to following start), for per-night cost figures."""
    upcoming = schedule.next_transitions(now, 3)
    for first, second in itertools.pairwise(upcoming):
        if first.state == "stopped" and second.state == "running":
            return (second.at - first.at).total_seconds() / 3600
    return 0.0


def state_text(row: StatusRow) -> str:
    """The state as one cell: ``stopped (held stopped until Mon 08:00Z)``."""
    if row.hold is None:
        return row.state
    until = f" until {row.hold.until.astimezone(UTC):%a %H:%M}Z" if row.hold.until else ""
    return f"{row.state} (held {row.hold.state}{until})"
