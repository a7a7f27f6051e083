"""What a hold does to the schedule's planned steps (``plan``): a hold in force overrides every step
before its end (none while held until released), and where the schedule then wants the other state,
its end is a step of its own. Pure: the steps and each cluster's hold in, the steps the engine takes out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from hyperpod_scheduler.engine.fleet import Governed
from hyperpod_scheduler.engine.plan_steps import PlannedStep, next_transition
from hyperpod_scheduler.engine.planner import Action, effective_hold
from hyperpod_scheduler.store.records import ClusterRecord, Hold


def _place(account: str | None, region: str | None, profile: str | None, name: str) -> tuple[str, ...]:
    return (account or "", region or "", profile or "", name)


def through_holds(
    steps: Iterable[PlannedStep], governed: Iterable[Governed], holds: Mapping[str, Hold], until: datetime
) -> list[PlannedStep]:
    """``steps`` as the engine will take them, ``holds`` (in force now, by cluster key) applied."""
    ends: dict[tuple[str, ...], datetime | None] = {}
    added: list[PlannedStep] = []
    for g in governed:
        hold = holds.get(g.ref.key)
        if hold is None:
            continue
        ends[_place(g.ref.account, g.ref.region, g.ref.profile, g.ref.name)] = hold.until
        if hold.until is not None and hold.until < until and g.schedule.state_at(hold.until) != hold.state:
            action: Action = "start" if hold.state == "stopped" else "stop"
            why = f"the hold ({hold.state}, by {hold.by}) ends {hold.until:%a %H:%M}Z"
            place = (g.ref.account, g.ref.region, g.ref.profile)
            added.append(PlannedStep(hold.until, g.ref.name, action, g.schedule_label, why, *place))
    kept = []
    for s in steps:
        key = _place(s.account, s.region, s.profile, s.cluster)
        if key in ends:
            end = ends[key]
            if end is None or s.at < end:
                continue  # overridden by the hold
        kept.append(s)
    return sorted([*kept, *added], key=lambda s: (s.at, s.cluster, s.account or "", s.region or "", s.profile or ""))


def holds_in_force(
    record_of: Callable[[str], ClusterRecord | None], governed: Iterable[Governed], now: datetime
) -> dict[str, Hold]:
    """Each governed cluster's hold in force at ``now``, by cluster key (a lapsed one is none)."""
    holds = {}
    for g in governed:
        record = record_of(g.ref.key)
        if record is not None and record.hold is not None and effective_hold(record, now) is not None:
            holds[g.ref.key] = record.hold
    return holds


def next_change(g: Governed | None, hold: Hold | None, now: datetime) -> tuple[datetime, str] | None:
    """The next change the engine makes (at, state): the schedule's, unless a hold is in force. Held
    until released: none (the schedule's transitions pass it by). Held until a time: at its end, the
    state the schedule wants then if that differs from the hold's, else the schedule's next after it."""
    if g is None:
        return None
    if hold is None:
        return next_transition(g.schedule, now)
    if hold.until is None:
        return None
    then = g.schedule.state_at(hold.until)
    return (hold.until, then) if then != hold.state else next_transition(g.schedule, hold.until)
