"""What the schedules will ask for over a horizon, touching nothing: the steps ``plan`` lists."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from hyperpod_scheduler.engine.planner import Action
from hyperpod_scheduler.engine.readiness import Lead
from hyperpod_scheduler.schedule import Schedule

if TYPE_CHECKING:
    from hyperpod_scheduler.engine.fleet import Governed

HORIZON = timedelta(days=7)  # how far `plan` looks unless told


@dataclass(frozen=True)
class PlannedStep:
    at: datetime  # when the step is issued
    cluster: str
    action: Action
    schedule: str
    why: str = ""
    # Where the cluster is: two targets' clusters of one name are two steps a reader must tell apart.
    account: str | None = None
    region: str | None = None
    profile: str | None = None  # the profile that reaches it: which namesake, before its account is known


def plan(
    governed: Iterable[Governed], start: datetime, until: datetime, leads: Mapping[str, Lead] | None = None
) -> list[PlannedStep]:
    """What the schedules will ask for between ``start`` and ``until``, touching nothing. ``leads``
    (by cluster key) moves ready-by starts earlier and says why."""
    steps: list[PlannedStep] = []
    for g in governed:
        lead = (leads or {}).get(g.ref.key)
        place = (g.ref.account, g.ref.region, g.ref.profile)
        # Two targets name this cluster name and their sameness is not known yet: the step is this
        # target's only if the first look finds another cluster than the other's (said first: a narrow
        # table shortens a cell from its end).
        maybe = "if this target governs it (another target names it too): " if g.looks_first else ""
        for t in g.schedule.transitions(start, until + (lead.lead if lead else timedelta())):
            action: Action = "start" if t.state == "running" else "stop"
            if not g.schedule.allows(action):
                continue
            if action == "start" and lead is not None and g.schedule.ready_by:
                issue = t.at - lead.lead
                why = (
                    f"{maybe}ready by {t.at:%a %H:%M}Z: starts {lead.lead.total_seconds() / 60:.0f} min early "
                    f"({lead.why})"
                )
                if start <= issue < until:
                    steps.append(PlannedStep(issue, g.ref.name, action, g.schedule_label, why, *place))
            elif t.at < until:
                said = maybe + _why(g.schedule, t.at, action)
                steps.append(PlannedStep(t.at, g.ref.name, action, g.schedule_label, said, *place))
    return sorted(steps, key=lambda s: (s.at, s.cluster, s.account or "", s.region or "", s.profile or ""))


def _why(schedule: Schedule, at: datetime, action: Action) -> str:
    """The schedule's own reason for a step, in its own words and time zone (never an empty cell). The
    reason comes first: a narrow table shortens the cell from its end, and the expression is the least
    needed part of it."""
    local = at.astimezone(schedule.timezone)
    turn = "window ends" if action == "stop" else "window opens"
    expression = f" ({schedule.expression})" if schedule.expression else ""
    return f"{turn} {local:%a %H:%M} {local.tzname() or schedule.timezone.key}{expression}"


def next_transition(schedule: Schedule, now: datetime) -> tuple[datetime, str] | None:
    found = schedule.next_transitions(now, 1)
    return (found[0].at, found[0].state) if found else None


def as_mapping(steps: Iterable[PlannedStep]) -> list[Mapping[str, Any]]:
    """The steps as JSON; every step names its account and region (null: not known yet), one fleet or
    many, so a reader's parser does not change with the fleet's shape."""
    return [
        {
            "at": s.at.isoformat(),
            "cluster": s.cluster,
            "account": s.account,
            "profile": s.profile,
            "region": s.region,
            "action": s.action,
            "schedule": s.schedule,
            "why": s.why,
        }
        for s in steps
    ]
