"""What a start of one cluster would send now, group by group, decided by the planner's own
``plan_start``: the one answer every face shows for "what a start brings back" (the dashboard's start
preview, and the CLI's ``start --dry-run`` through the same planner). A face that worked it out from
the recorded sizes alone promised "back to 4" for a group replaced while stopped (the engine refuses
that start) or one a person set by hand (the engine keeps it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.engine import planner
from hyperpod_scheduler.store.records import ClusterRecord

# sends: an UpdateCluster goes out. nothing: no update (nothing recorded, or already at the sizes).
# busy: the cluster is changing; nothing this look. refused: the planner refuses (a group or the
# cluster replaced while stopped) or a hold keeps it stopped (planner.hold_refusal).
StartOutcome = Literal["sends", "nothing", "busy", "refused"]


@dataclass(frozen=True)
class StartGroup:
    group: str
    instance_type: str | None
    now: int  # the nodes it has or is going to (the larger of current and target)
    after: int  # what the start leaves it at
    restored: bool  # the start sends it back to its recorded size
    instance_types: tuple[str, ...] = ()

    @property
    def change(self) -> str:
        return f"back to {self.after}" if self.restored and self.after != self.now else "as it is"


@dataclass(frozen=True)
class StartForecast:
    outcome: StartOutcome
    groups: tuple[StartGroup, ...]
    reason: str = ""  # why nothing would be sent
    notes: tuple[str, ...] = ()  # the planner's notes: groups left as they are, and why

    @property
    def nothing(self) -> str | None:
        """Why a start would send nothing, in a sentence for a preview; None when it sends."""
        if self.outcome == "sends":
            return None
        if self.outcome == "busy":
            return f"{self.reason}: nothing would be sent now"
        if self.outcome == "refused":
            return f"refused: {self.reason}: nothing would be sent"
        if self.reason.startswith("nothing recorded"):
            return "no sizes recorded for this cluster: a start would do nothing"
        return "already at the recorded sizes: nothing would be sent"


def forecast(view: ClusterView, record: ClusterRecord | None, now: datetime, release: str) -> StartForecast:
    """``release``: the command that ends a hold (``ClusterRef.command("release")``), for the refusal."""
    held = planner.hold_refusal(record, now, "start", release)
    plan = planner.plan_start(view, record) if held is None else planner.Refuse(held)
    counts = plan.counts if isinstance(plan, planner.Send) else {}
    groups = tuple(
        StartGroup(
            g.name,
            g.instance_type,
            max(g.current, g.target),
            counts[g.name][0] if g.name in counts else max(g.current, g.target),
            g.name in counts,
            g.instance_types,
        )
        for g in view.groups
    )
    if isinstance(plan, planner.Send):
        return StartForecast("sends", groups, notes=plan.notes)
    if isinstance(plan, planner.Skip):
        return StartForecast("busy", groups, plan.reason)
    if isinstance(plan, planner.Refuse):
        return StartForecast("refused", groups, plan.reason)
    return StartForecast("nothing", groups, plan.reason)
