"""Intents found in the record: an update stored but never marked sent (a crash, a lost answer), or an
earlier update a manual command meets. Did it go out (follow it), is someone else's update running
(wait), or is it still what is wanted (plan it again) or superseded (withdraw it)?"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.engine import acting, crashpoints, planner, settling
from hyperpod_scheduler.engine.ref import ClusterRef, Result
from hyperpod_scheduler.store.records import ClusterRecord

if TYPE_CHECKING:
    from hyperpod_scheduler.engine.runner import Engine


def revisit(
    eng: Engine,
    ref: ClusterRef,
    record: ClusterRecord,
    sched: planner.ScheduleState,
    enforced: bool,
    dry_run: bool,
    view: ClusterView | None = None,
) -> Result:
    """An intent stored but never marked sent (a crash, a lost answer): did it go out, and if not,
    is it still what the schedule and the user want now?"""
    pending = record.pending
    assert pending is not None
    view = view or eng.describe(ref)
    fate = planner.intent_fate(view, pending.targets)
    if fate == "out":
        if dry_run:
            return dry(eng, ref, f"would follow the {pending.action} that had gone out")
        mark_sent(eng, ref, record, f"{pending.action} had gone out before an interruption; following it")
        return settling.follow(eng, ref, wait=False)
    if fate == "busy":
        return someone_else(eng, ref, pending.action, view)
    why = planner.superseded(record, sched, eng.now())
    if why is not None:
        if dry_run:
            return dry(eng, ref, f"would withdraw the {pending.action} that never went out: {why}")
        withdraw(eng, ref, record, why)
        after = eng.store.get(ref.key)
        due = planner.due(after, sched, enforced=enforced, now=eng.now())
        if due is None:
            return Result(ref.name, "noop", f"withdrew the {pending.action} that never went out: {why}")
        return acting.act_on(eng, ref, sched, due, dry_run)
    eng.emit(
        ref, "note", f"{pending.action} was interrupted before it went out; planning it again from the cluster now"
    )
    return acting.act(
        eng,
        ref,
        pending.action,
        transition_id=pending.transition_id,
        transition_at=pending.transition_at,
        origin=pending.served_by(),
        reason="resumed",
        dry_run=dry_run,
        replan=True,
        view=view,
    )


def earlier(
    eng: Engine, ref: ClusterRef, record: ClusterRecord, action: planner.Action, dry_run: bool, wait: bool, poll: float
) -> Result | None:
    """A manual command finds an earlier update: follow it if it went out, withdraw it if it did not
    (the command is the newest word: a manual start never sends an earlier stop), or wait when
    someone else's update runs. None: go on with the command."""
    pending = record.pending
    assert pending is not None
    if pending.phase == "intent":
        view = eng.describe(ref)
        fate = planner.intent_fate(view, pending.targets)
        if fate == "busy":
            # That is the earlier intent's fate, not this command's: this one is not sent (exit 3), never
            # passed off as progress (the earlier one is decided once someone else's update settles).
            waits = someone_else(eng, ref, pending.action, view)
            return Result(ref.name, "skip", f"{waits.message}; this {action} was not sent")
        if fate == "unsent":
            if dry_run:
                return dry(eng, ref, f"would withdraw the {pending.action} that never went out, then {action}")
            withdraw(eng, ref, record, f"superseded by a manual {action}")
            return None
        if dry_run:
            return dry(eng, ref, f"would follow the {pending.action} that had gone out first")
        record = mark_sent(eng, ref, record, f"{pending.action} had gone out before an interruption")
    elif dry_run:
        return dry(eng, ref, f"would follow the {pending.action} in flight first")
    if pending.action == action:
        return under_way(eng, ref, record, wait, poll)
    eng.emit(ref, "note", f"an earlier {pending.action} is still settling; following it first")
    result = settling.follow(eng, ref, wait=True, poll_seconds=poll) if wait else settling.follow(eng, ref, wait=False)
    if result.kind == "in-progress":
        # This command is not sent: say so (a skip), never let the earlier update's progress pass for it.
        message = f"the earlier {pending.action} is still settling ({result.message}); this {action} was not sent"
        return Result(ref.name, "skip", message)
    return result if result.kind == "skip" else None


def under_way(eng: Engine, ref: ClusterRef, record: ClusterRecord, wait: bool, poll: float) -> Result | None:
    """A command meets an update of its own kind already sent: the person's wish is on its way. Without
    ``--wait`` nothing new is sent and the line names the update under way (a skip, exit 3: ``--wait``
    follows it); with it, that update is followed to its end as a fresh ``--wait`` would be: its failure
    is this command's answer (no second start is sent behind a failed one), and once it settled the
    command goes on (``acting.act``: a stop with ``--include-protected`` still sends what the earlier
    stop kept), answering with the followed update when nothing more is needed."""
    pending = record.pending
    assert pending is not None
    which = f"({pending.transition_id}, sent {_clock(pending.created_at)})"
    said = f"a {pending.action} is already under way {which}"
    if not wait:
        result = settling.follow(eng, ref, wait=False)
        if result.kind == "in-progress":
            message = f"{said}: {result.message}; this {pending.action} was not sent"
            eng.emit(ref, "skip", message)
            return Result(ref.name, "skip", message)
        return result if result.kind == "skip" else None
    eng.emit(ref, "note", f"{said}; following it to its end")
    result = settling.follow(eng, ref, wait=True, poll_seconds=poll)
    if result.kind == "noop":  # settled by another runner meanwhile: nothing of it left to follow
        return None
    if result.kind not in ("settled", "failed"):  # not followed to an end (a lost lease): said as it is
        return result
    return Result(ref.name, result.kind, f"followed the {pending.action} already under way {which}: {result.message}")


def _clock(at: datetime) -> str:
    return f"{at.astimezone(UTC):%a %d %b %H:%M} UTC"


def someone_else(eng: Engine, ref: ClusterRef, action: str, view: ClusterView) -> Result:
    message = (
        f"the {action} stored before an interruption never went out and {view.busy_reason()} with other "
        "targets (someone else's update): it waits, and is decided once that settles"
    )
    eng.emit(ref, "skip", message)
    return Result(ref.name, "in-progress", message)


def dry(eng: Engine, ref: ClusterRef, message: str) -> Result:
    eng.emit(ref, "dry-run", message)
    return Result(ref.name, "dry-run", message)


def mark_sent(eng: Engine, ref: ClusterRef, record: ClusterRecord, note: str) -> ClusterRecord:
    pending = record.pending
    assert pending is not None
    eng.emit(ref, "note", note)
    # Not durable on its own (see _send): found again from the cluster's targets if it is lost.
    return eng.store.put(
        record.evolve(pending=pending.evolve(phase="sent", updated_at=eng.now()), updated_at=eng.now()),
        expected_version=record.version,
        durable=False,
    )


def withdraw(eng: Engine, ref: ClusterRef, record: ClusterRecord, why: str) -> None:
    """Drop an intent that never went out; its history line says what superseded it."""
    pending = record.pending
    assert pending is not None
    line = eng.entry(ref, pending.action, "withdrawn", reason=why, transition=pending.transition_id)
    eng.store.put(record.evolve(pending=None, updated_at=eng.now()), expected_version=record.version, history=[line])
    crashpoints.reached("after-withdraw")
    eng.emit(ref, "note", f"withdrew the {pending.action} that never went out: {why}")
