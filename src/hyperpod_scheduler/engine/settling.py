"""Following an update until it settles: look at the cluster, bring a start's phases up to date, and
once it has settled, record the outcome per group, the start's timing and, for a start rolled back for
capacity, when it is tried again."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.engine import crashpoints, fidelity, guard_round, images, intents, phases, planner
from hyperpod_scheduler.engine.look import look
from hyperpod_scheduler.engine.messages import duration_text, error_text
from hyperpod_scheduler.engine.ref import ClusterRef, Result
from hyperpod_scheduler.guards.coverage import UNAUDITED_EKS
from hyperpod_scheduler.store.errors import ConflictError
from hyperpod_scheduler.store.outcomes import outcomes_detail
from hyperpod_scheduler.store.records import ClusterRecord, PendingAction, RetryState

if TYPE_CHECKING:
    from hyperpod_scheduler.engine.runner import Engine


def follow(eng: Engine, ref: ClusterRef, *, wait: bool, poll_seconds: float = 30.0) -> Result:
    while True:
        record = eng.store.get(ref.key)
        if record is None or record.pending is None:
            return Result(ref.name, "noop", "nothing in flight")
        pending = record.pending
        targets = dict(pending.targets)
        kept = record.snapshot.kept if record.snapshot is not None and pending.action == "stop" else {}
        view = eng.describe(ref)
        if pending.phase == "intent":
            fate = planner.intent_fate(view, targets)
            if fate == "unsent":
                message = f"the {pending.action} never went out; the next tick decides whether it is still wanted"
                eng.emit(ref, "skip", message)
                return Result(ref.name, "skip", message)
            if fate == "busy":
                return intents.someone_else(eng, ref, pending.action, view)
            intents.mark_sent(eng, ref, record, f"{pending.action} had gone out before an interruption; following it")
            continue
        if pending.action == "start" and pending.phases:
            record = look_again(eng, ref, record, view)
            assert record.pending is not None
            pending = record.pending
        verdict = planner.assess(view, pending.action, targets, pending.created_at, eng.now(), eng.settle_timeout, kept)
        if isinstance(verdict, planner.Settled):
            crashpoints.reached("before-settle")
            return settle(eng, ref, record, verdict, view)
        # Reported when the verdict, the phases or any group's count or status moves (a live
        # display follows it).
        line = verdict.detail
        if pending.phases:
            types = {g.name: g.instance_type for g in view.groups}
            line = phases.progress(pending.phases, eng.now(), types)
        said = line.split(": ", 1)[-1] if pending.phases else line  # the time alone is no news
        seen = f"{said}|{view.currents()}|{[g.status for g in view.groups]}"
        if seen != eng._last_progress.get(ref.key):
            eng.emit(
                ref,
                "progress",
                f"{pending.action}: {line}",
                counts=view.currents(),
                target_counts=targets,
                statuses={g.name: g.status for g in view.groups},
                **(
                    {"phases": {g: p.model_dump(mode="json") for g, p in pending.phases.items()}}
                    if pending.phases
                    else {}
                ),
            )
            eng._last_progress[ref.key] = seen
        if not wait:
            return Result(ref.name, "in-progress", verdict.detail)
        eng.sleep(poll_seconds)
        crashpoints.reached("while-following")
        if not eng.keep_lease(ref):
            message = "lost this cluster's lease while waiting; another runner follows it now"
            eng.emit(ref, "skip", message)
            return Result(ref.name, "skip", message)


def look_again(eng: Engine, ref: ClusterRef, record: ClusterRecord, view: ClusterView) -> ClusterRecord:
    """Bring the start's phases up to date from one look at its nodes and events (never fatal:
    a look that fails leaves the phases as they were)."""
    pending = record.pending
    assert pending is not None
    try:
        seen = look(eng.client(ref), view, pending.created_at, eng.now())
    except Exception as exc:  # phases are for seeing; following the start must go on without them
        eng.emit(ref, "note", f"phases not updated: {error_text(exc)}")
        return record
    if seen.note and seen.note != eng._last_progress.get(ref.key + "#look"):
        eng.emit(ref, "note", f"phases: {seen.note}")
        eng._last_progress[ref.key + "#look"] = seen.note
    updated = phases.advance(pending.phases, seen)
    if updated == pending.phases:
        return record
    try:
        # Not fsynced: a phase seen is telemetry (lost with a power loss, it is seen again or missed).
        return eng.store.put(
            record.evolve(pending=pending.evolve(phases=updated), updated_at=eng.now()),
            expected_version=record.version,
            durable=False,
        )
    except ConflictError:
        return eng.store.get(ref.key) or record


def settle(eng: Engine, ref: ClusterRef, record: ClusterRecord, verdict: planner.Settled, view: ClusterView) -> Result:
    pending = record.pending
    assert pending is not None
    seen = dict(pending.phases)
    # Ready means joined Slurm and idle, not just Running in the API: ask before timing the start.
    if (
        pending.action == "start"
        and verdict.ok
        and guard_round.after_start(eng, ref, view, {o.group: o.current for o in verdict.outcomes})
    ):
        seen = phases.joined_slurm(seen, eng.now())
    now = eng.now()
    # The host's clock stepped back since the intent (NTP, a restored VM) makes this negative: how long
    # it took is then unknown. The line says 0 and the start-time estimates leave it out.
    measured = (now - pending.created_at).total_seconds()
    duration = max(0.0, measured)
    # Dated no earlier than the transition already applied (a host clock stepped back since it).
    applied_at: datetime | None = record.applied_from(pending.transition_at or now)
    if pending.served_by() == "hold" and planner.effective_hold(record, now) is None:
        # Released (or lapsed) while its update was in flight: the schedule decides from here on, as
        # release promised, rather than this moment counting as the schedule's latest transition.
        applied_at = None
    updated = record.evolve(
        pending=None,
        applied_state=verdict.state,
        applied_transition_at=applied_at,
        last_outcomes=list(verdict.outcomes),
        updated_at=now,
    )
    if pending.action == "start" and verdict.ok:
        if measured >= 0:
            updated = updated.add_start_duration(duration, now, phases.ready_durations(seen))
        updated = updated.evolve(retry=None)
    changes = fidelity.ami_changes(record.snapshot.sizes, view) if record.snapshot and pending.action == "start" else []
    taken = list(record.images.taken) if pending.action == "start" else []
    if pending.action == "start":
        # A release we moved a group to is no drift; whether its first morning went well is judged here.
        changes = [c for c in changes if not any(u.group == c.group and u.to_release == c.to_release for u in taken)]
        updated = updated.evolve(ami_changes=changes, images=images.judged(record.images, verdict.outcomes, view))
        restored = {o.group for o in verdict.outcomes if o.outcome == "restored"}
        if record.snapshot is not None and restored & set(record.snapshot.kept):
            # A group restored is no longer at our floor: a size it has later is a person's.
            kept = {g: n for g, n in record.snapshot.kept.items() if g not in restored}
            updated = updated.evolve(snapshot=record.snapshot.evolve(kept=kept))
    retry_note = ""
    if pending.action == "start" and not verdict.ok and _rolled_back(verdict):
        retry = next_retry(eng, record, pending, verdict.detail, now)
        updated = updated.evolve(retry=retry)
        retry_note = (
            f"; retry {retry.attempt} at {retry.next_at:%H:%M}Z (until {retry.deadline:%H:%M}Z)"
            if retry
            else "; retries exhausted"
        )
    if pending.action == "stop":
        updated = updated.evolve(retry=None)
    outcomes = outcomes_detail(verdict.outcomes)
    kind = "settled" if verdict.ok else "failed"
    extra: dict[str, Any] = {}
    if pending.action == "stop" and record.snapshot is not None:
        # What this night held back, for cost reports (the record's snapshot may change later).
        extra["sizes"] = {
            n: {"count": sz.count, "instance_type": sz.instance_type, "instance_types": list(sz.types)}
            for n, sz in record.snapshot.sizes.items()
        }
        extra["kept"] = dict(record.snapshot.kept)
    if pending.action == "stop" and view.orchestrator == "Eks":
        extra["audit"] = UNAUDITED_EKS  # every stop of one says so, whoever asked for it
    line = eng.entry(
        ref,
        pending.action,
        "ok" if verdict.ok else "failed",
        duration,
        outcomes=outcomes,
        message=verdict.detail,
        **extra,
        **({"ami_changes": [c.model_dump() for c in changes]} if changes else {}),
        **({"image_updates": [u.model_dump() for u in taken]} if taken else {}),
        **({"phases": {g: p.model_dump(mode="json") for g, p in seen.items()}} if seen else {}),
    )
    eng.store.put(updated, expected_version=record.version, history=[line])
    crashpoints.reached("after-settle")
    groups = ", ".join(f"{o.group} {o.outcome} {o.current}/{o.target}" for o in verdict.outcomes)
    how = "settled" if verdict.ok else f"did not settle ({verdict.detail}{retry_note})"
    said = f"{pending.action} {how} after {duration_text(duration)}: {groups}"
    due = pending.transition_at
    readiness: dict[str, Any] = {}
    if pending.action == "start" and verdict.ok and due is not None and pending.served_by() != "manual":
        # Ready when the schedule's day began, or how long after it (a ready-by start is meant to be early).
        spare = (due - now).total_seconds()
        readiness = {"ready_for": {"at": due.isoformat(), "spare_s": spare}}
        said += (
            f"; ready {duration_text(spare)} before {due:%a %H:%M}Z"
            if spare >= 0
            else f"; ready {duration_text(-spare)} after {due:%a %H:%M}Z"
        )
    if seen:
        types = {g.name: g.instance_type for g in view.groups}
        passed = any(p.durations_s() for p in seen.values())
        said += f" [{phases.progress(seen, now, types)}" + (f"; phases {phases.summary(seen)}]" if passed else "]")
    eng.emit(
        ref,
        kind,
        said,
        outcomes=outcomes,
        **({"phases": {g: p.model_dump(mode="json") for g, p in seen.items()}} if seen else {}),
        **readiness,
    )
    if taken:
        how = "" if verdict.ok else " (this start failed: refused for these groups from now on)"
        eng.emit(ref, "image", f"AMI: {images.line(taken)}{how}", image_updates=[u.model_dump() for u in taken])
    if changes:
        eng.emit(ref, "drift", fidelity.describe_changes(changes), ami_changes=[c.model_dump() for c in changes])
    return Result(ref.name, kind, verdict.detail)


def overtake(eng: Engine, ref: ClusterRef, record: ClusterRecord, why: str) -> bool:
    """Record the update in flight as it stands now (per group), because ``why``; False (nothing
    recorded) while the cluster is busy: then it is still followed, and the new transition waits."""
    pending = record.pending
    assert pending is not None
    view = eng.describe(ref)
    if view.busy:
        return False
    kept = record.snapshot.kept if record.snapshot is not None and pending.action == "stop" else {}
    verdict = planner.assess(view, pending.action, pending.targets, pending.created_at, eng.now(), timedelta(0), kept)
    if not isinstance(verdict, planner.Settled):
        return False
    settle(eng, ref, record, replace(verdict, detail=f"overtaken: {why}"), view)
    return True


def next_retry(
    eng: Engine, record: ClusterRecord, pending: PendingAction, reason: str, now: datetime
) -> RetryState | None:
    """Backoff for a start that rolled back: None once the deadline would pass. Each retry belongs to
    the start it retries (its transition id and instant); another start's retry is never continued."""
    base = pending.transition_id.split("#retry")[0]
    previous = record.retry if record.retry is not None and record.retry.transition_id == base else None
    attempt = previous.attempt + 1 if previous else 1
    deadline = previous.deadline if previous else now + timedelta(minutes=eng.retry.deadline_minutes)
    steps = eng.retry.backoff_minutes or [10.0]
    next_at = now + timedelta(minutes=steps[min(attempt - 1, len(steps) - 1)])
    if next_at > deadline:
        return None
    return RetryState(
        transition_id=base,
        attempt=attempt,
        next_at=next_at,
        deadline=deadline,
        reason=reason[:200],
        transition_at=previous.transition_at if previous else pending.transition_at,
    )


def _rolled_back(verdict: planner.Settled) -> bool:
    """An all-or-nothing rollback (retry it); a Continuous group still short keeps retrying in HyperPod."""
    return any(o.outcome == "failed" for o in verdict.outcomes)
