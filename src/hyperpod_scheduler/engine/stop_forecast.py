"""What a stop of one cluster would send now, group by group, decided by the planner and the guards
themselves: the one answer every face shows for "what a stop keeps" (the stop preview, tonight's
bill, "never stopped", the approval and AMI-approval wording, ``plan``).

Pure but for the guards it is given, which must be the ones without side effects (the capacity and
approval guards, the audit-coverage check): a checkpoint audit signals and drains, so it is asked
only by the stop itself, and a forecast says so (``audited_at_stop``). The view should carry the
Slurm roles the stop uses (``app.actions.stop_view``: the record's, else the file's, as the stop reads it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.engine import fidelity, guard_round, planner
from hyperpod_scheduler.engine.ref import ClusterRef
from hyperpod_scheduler.guards.base import StopGuard, Verdict
from hyperpod_scheduler.store.records import ClusterRecord, Origin

# sends: an UpdateCluster goes out. nothing: no update (already at zero, or every group with nodes
# kept). blocked: a guard skips the stop. busy: the cluster is changing; nothing this look.
# refused: no update may go to this cluster at all (engine.fidelity), or a person's stop now is refused
# because a hold keeps it running (planner.hold_refusal: the next tick would reverse it).
Outcome = Literal["sends", "nothing", "blocked", "busy", "refused"]


@dataclass(frozen=True)
class GroupForecast:
    group: str
    instance_type: str | None
    now: int  # the nodes it has or is going to (the larger of current and target)
    after: int  # what the stop leaves it at
    why: str = ""  # why it stays up (the guard's own words); empty when it goes to zero
    kept_by: str = ""  # what keeps it: floor, keep, scarce, training plan, slurm head, role unknown, approval
    overridable: bool = False  # a stop with --include-protected releases it
    instance_types: tuple[str, ...] = ()  # every type it may run (several: a flexible group, no instance_type)

    @property
    def walked_down(self) -> bool:
        return self.after < self.now


@dataclass(frozen=True)
class StopForecast:
    outcome: Outcome
    groups: tuple[GroupForecast, ...]
    reason: str = ""  # why nothing would be sent (blocked, busy, refused, nothing)
    audited_at_stop: bool = False  # a guard with side effects (the checkpoint audit) is asked only then

    @property
    def sends(self) -> bool:
        return self.outcome == "sends"

    @property
    def kept(self) -> tuple[GroupForecast, ...]:
        """The groups left with nodes when the stop goes out (or would, but for nothing to send)."""
        return tuple(g for g in self.groups if g.after > 0)

    @property
    def released(self) -> tuple[GroupForecast, ...]:
        """The groups the stop walks from nodes to zero."""
        return tuple(g for g in self.groups if g.now > 0 and g.after == 0)

    @property
    def keeps_everything(self) -> bool:
        """Nothing is sent only because every group with nodes is kept (a floor, keep, the Slurm head,
        protected capacity, an approval not given): the cluster runs on, whatever its record says."""
        return self.outcome == "nothing" and bool(self.kept)


def forecast(
    view: ClusterView,
    record: ClusterRecord | None,
    ref: ClusterRef,
    guards: Sequence[StopGuard],
    *,
    now: datetime,
    transition_at: datetime | None = None,
    origin: Origin = "manual",
    audited_at_stop: bool = False,
) -> StopForecast:
    """What ``engine.acting.act`` would decide for a stop of ``ref`` now: the planner's plan, the
    guards' verdicts and their floors, exactly as the stop combines them (``guard_round``). A guard
    with side effects among ``guards`` is not asked (it says only at the stop: ``audited_at_stop``)."""
    audited = audited_at_stop or any(g.side_effects for g in guards)
    plain = [g for g in guards if not g.side_effects]
    refused = planner.hold_refusal(record, now, "stop", ref.command("release")) if origin == "manual" else None
    refused = refused or fidelity.refusal(view, ref.settings.policy)
    if refused is not None:
        return StopForecast("refused", _as_is(view, refused, "refused"), refused)
    plan = planner.plan_stop(view, record, now, "forecast")
    if isinstance(plan, planner.Skip):
        return StopForecast("busy", _as_is(view, plan.reason, "busy"), plan.reason)
    if not isinstance(plan, planner.Send):  # every group at zero already
        return StopForecast("nothing", _groups(view, {}), plan.reason)
    ctx = guard_round.stop_context(ref, view, plan, now, transition_at or now, origin, dry_run=True)
    verdicts = [guard_round.ask(g, ctx) for g in plain]
    blocked = [v for v in verdicts if v.decision == "block"]
    if blocked:
        reason = guard_round.block_reason(blocked)
        return StopForecast("blocked", _as_is(view, reason, "blocked"), reason, audited)
    floors = guard_round.add_floors({}, verdicts)
    decided = planner.apply_floors(plan, view, floors)
    why = _why(verdicts, floors)
    if isinstance(decided, planner.Noop):
        return StopForecast("nothing", _groups(view, view.targets(), why), decided.reason)
    after = {name: count for name, (count, _) in decided.counts.items()}
    return StopForecast("sends", _groups(view, after, why), "", audited)


def _as_is(view: ClusterView, reason: str, kind: str) -> tuple[GroupForecast, ...]:
    """Every group left as it is (no update goes out), each with nodes saying why."""
    return _groups(view, view.targets(), {g.name: (reason, kind, False) for g in view.groups})


def _groups(
    view: ClusterView, after: Mapping[str, int], why: Mapping[str, tuple[str, str, bool]] | None = None
) -> tuple[GroupForecast, ...]:
    out = []
    for g in view.groups:
        left = after.get(g.name, 0)
        reason, kind, overridable = (why or {}).get(g.name, ("", "", False)) if left > 0 else ("", "", False)
        now = max(g.current, g.target)
        out.append(GroupForecast(g.name, g.instance_type, now, left, reason, kind, overridable, g.instance_types))
    return tuple(out)


def _why(verdicts: Sequence[Verdict], floors: Mapping[str, int]) -> dict[str, tuple[str, str, bool]]:
    """Per kept group, the words, the kind and whether --include-protected releases it, from the
    verdict whose floor won (the first among equals)."""
    out: dict[str, tuple[str, str, bool]] = {}
    for v in verdicts:
        if v.decision != "keep":
            continue
        reasons = v.detail.get("reasons") or {}
        kinds = v.detail.get("kinds") or {}
        overridable = v.detail.get("overridable") or {}
        for group, count in v.floors.items():
            if group not in out and count == floors.get(group):
                why = str(reasons.get(group) or v.reason)
                out[group] = (why, str(kinds.get(group) or v.guard), bool(overridable.get(group, False)))
    return out


__all__ = ["GroupForecast", "Outcome", "StopForecast", "forecast"]
