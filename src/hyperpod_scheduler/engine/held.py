"""What a hold does to the schedule's planned steps (``plan``): a hold in force overrides every step
before its end (none while held until released), and where the schedule then wants the other state,
its end is a step of its own. Pure: the steps and each cluster's hold in, the steps the engine takes out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from hyperpod_scheduler.engine.fleet import Governed, PlannedStep
from hyperpod_scheduler.engine.planner import Action
from hyperpod_scheduler.store.records import Hold


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
