"""The guard round before a stop, and the guards' word after a start.

Every guard is asked about a stop; a block skips it (until the next transition), a keep leaves groups up
at a floor. Guards with side effects (the checkpoint audit signals, drains and requeues on allow) run
last, only if every other guard allowed, and only on the groups that really go to zero."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.engine import acting, planner
from hyperpod_scheduler.engine.ref import ClusterRef, Result
from hyperpod_scheduler.guards.base import StopContext, StopGuard, Verdict
from hyperpod_scheduler.store.records import ClusterRecord, Origin

if TYPE_CHECKING:
    from hyperpod_scheduler.engine.runner import Engine


def run(
    eng: Engine,
    ref: ClusterRef,
    record: ClusterRecord | None,
    view: ClusterView,
    plan: planner.Send,
    transition_at: datetime,
    dry_run: bool,
    origin: Origin = "manual",
) -> planner.Send | planner.Noop | Result:
    """Ask every guard about this stop: a block skips it (until the next transition), keeps leave groups up."""
    ctx = stop_context(ref, view, plan, eng.now(), transition_at, origin, dry_run)
    guards = list(eng.guards_for(ref))
    # Guards with side effects (the checkpoint guard signals, drains and requeues on allow) run last,
    # only if every other guard allowed, and only on the groups that really go to zero.
    plain = [g for g in guards if not g.side_effects]
    with_effects = [g for g in guards if g.side_effects]
    floors: dict[str, int] = {}
    for batch in (plain, with_effects):
        if batch is with_effects:
            ctx = replace(ctx, groups_to_zero=tuple(n for n in ctx.groups_to_zero if n not in floors))
        verdicts = [ask(guard, ctx) for guard in batch]
        blocked = [v for v in verdicts if v.decision == "block"]
        if blocked:
            reason = block_reason(blocked)
            eng.emit(ref, "blocked", f"stop blocked: {reason}", guards=[v.guard for v in blocked])
            if not dry_run:
                line = eng.entry(ref, "stop", "blocked", reason=reason, verdicts=[_verdict_detail(v) for v in blocked])
                acting.mark_applied(eng, ref, record, "running", transition_at, line)
            return Result(ref.name, "blocked", reason)
        add_floors(floors, verdicts)
        for v in verdicts:
            if v.decision == "keep":
                eng.emit(ref, "note", f"{v.guard}: {v.reason}")
            elif v.detail:  # an allow with something to say (what the audit did, that none ran)
                eng.emit(ref, "note", f"{v.guard}: {v.reason}", **{"verdict": _verdict_detail(v)})
    return planner.apply_floors(plan, view, floors)


def stop_context(
    ref: ClusterRef,
    view: ClusterView,
    plan: planner.Send,
    now: datetime,
    transition_at: datetime | None,
    origin: Origin,
    dry_run: bool,
) -> StopContext:
    """What the guards are asked about this stop: the groups it walks from nodes to zero."""
    return StopContext(
        cluster=ref.name,
        key=ref.key,
        region=ref.region,
        view=view,
        groups_to_zero=tuple(n for n, (c, _) in plan.counts.items() if c == 0 and view.targets().get(n, 0) > 0),
        now=now,
        dry_run=dry_run,
        transition_at=transition_at,
        origin=origin,
    )


def block_reason(blocked: Sequence[Verdict]) -> str:
    return "; ".join(f"{v.guard}: {v.reason}" for v in blocked)


def add_floors(floors: dict[str, int], verdicts: Sequence[Verdict]) -> dict[str, int]:
    """The floors the ``keep`` verdicts ask for, merged into ``floors``: the highest count wins."""
    for v in verdicts:
        if v.decision == "keep":
            for group, count in v.floors.items():
                floors[group] = max(floors.get(group, 0), count)
    return floors


def ask(guard: StopGuard, ctx: StopContext) -> Verdict:
    try:
        return guard.before_stop(ctx)
    except Exception as exc:  # a check that cannot run must not let instances be terminated
        return Verdict(guard.name, "block", f"guard {guard.name} failed: {exc}")


def after_start(eng: Engine, ref: ClusterRef, view: ClusterView, expected: Mapping[str, int]) -> bool:
    """Let guards with a Slurm side resume what a stop drained and report readiness (nodes idle in
    Slurm). True when a Slurm agent said the restored nodes joined."""
    joined = False
    for guard in eng.guards_for(ref):
        if not guard.after_start:
            continue
        try:
            answer = guard.started(ref.key, view, dict(expected))
        except Exception as exc:  # a Slurm side that fails never undoes the start: said, and left
            eng.emit(ref, "error", f"{guard.name}: after start: {exc}")
            continue
        if answer is None:
            eng.emit(ref, "note", f"{guard.name}: the Slurm agent did not answer after the start")
        else:
            joined = joined or bool(answer.ready)
            eng.emit(ref, "note" if answer.ready else "failed", f"{guard.name}: {answer.reason}")
    return joined


def _verdict_detail(v: Verdict) -> dict[str, Any]:
    return {"guard": v.guard, "decision": v.decision, "reason": v.reason, **{k: v.detail[k] for k in v.detail}}
