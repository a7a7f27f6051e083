"""The send and its answer: plan one stop or start from a fresh look, store its intent, send it, and
read what AWS answered (accepted, refused, refused while deep health checks run, or not known).

Crash rules (never lose a remembered size; never send one transition twice):
1. The snapshot and a write-ahead ``intent`` are stored (compare-and-set) before UpdateCluster.
2. After AWS accepts the update the intent becomes ``sent``.
3. A re-run that finds ``intent`` compares the cluster's target counts with the intended ones to tell
   whether the call went out, and only re-sends if it did not (``engine.intents``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.engine import (
    crashpoints,
    fidelity,
    guard_round,
    image_update,
    intents,
    phases,
    planner,
    settling,
)
from hyperpod_scheduler.engine.messages import duration_text, sizes_text, targets_text
from hyperpod_scheduler.engine.ref import ClusterRef, Result
from hyperpod_scheduler.engine.slurm_roles import remember_roles, resolve_roles
from hyperpod_scheduler.engine.update_request import build_update
from hyperpod_scheduler.store.errors import ConflictError
from hyperpod_scheduler.store.outcomes import outcomes_detail
from hyperpod_scheduler.store.records import (
    ChecksWait,
    ClusterRecord,
    GroupOutcome,
    HistoryEntry,
    Origin,
    PendingAction,
    Refusal,
    Snapshot,
    request_digest,
)

if TYPE_CHECKING:
    from hyperpod_scheduler.engine.runner import Engine

_REFUSALS = ("ConflictException", "ValidationException", "ResourceNotFound")
# The guide documents the refusal's wording, not its code: accept either of the two that fit.
_CHECK_REFUSALS = ("ConflictException", "ValidationException")


def act_on(
    eng: Engine, ref: ClusterRef, sched: planner.ScheduleState, due: planner.Due, dry_run: bool, **kw: Any
) -> Result:
    action: planner.Action = "stop" if due.kind == "stop" else "start"
    if due.kind == "check":
        action = planner.action_for(sched.desired)
    return act(
        eng,
        ref,
        action,
        transition_id=due.transition_id,
        transition_at=due.transition_at,
        origin=due.origin,
        reason=due.reason,
        dry_run=dry_run,
        **kw,
    )


def act(
    eng: Engine,
    ref: ClusterRef,
    action: planner.Action,
    *,
    transition_id: str,
    transition_at: datetime | None = None,
    origin: Origin = "manual",
    reason: str = "manual",
    dry_run: bool = False,
    wait: bool = False,
    poll_seconds: float = 30.0,
    replan: bool = False,
    view: ClusterView | None = None,
    raise_to: Mapping[str, int] | None = None,
) -> Result:
    """``replan``: the record's pending intent never went out and is replaced by this one.
    ``raise_to``: a start of only these groups, to these counts (``planner.plan_raise``)."""
    record = eng.store.get(ref.key)
    message = planner.hold_refusal(record, eng.now(), action, ref.command("release")) if origin == "manual" else None
    if message is not None:
        # The next tick would carry out the hold again and reverse this command: refuse it, naming the hold.
        eng.emit(ref, "refused", message)
        return Result(ref.name, "refused", message)
    followed = None  # an update of this kind already under way, followed to its end (``intents.under_way``)
    if record is not None and record.pending is not None and not replan:
        earlier = intents.earlier(eng, ref, record, action, dry_run, wait, poll_seconds)
        if earlier is not None and earlier.kind != "settled":
            return earlier
        followed = earlier
        record = eng.store.get(ref.key)
        view = None
    view = view or eng.describe(ref)
    # The cluster's Slurm roles from its real shape: SlurmConfig, else provisioning_parameters.json,
    # else the Slurm agent's view (read once and remembered in the record).
    read, seen = eng.read_file, eng.slurm_shape
    roles = resolve_roles(
        view,
        record,
        None if read is None else lambda uri: read(ref, uri),
        eng.now(),
        None if seen is None else lambda: seen(ref),
    )
    view = roles.view
    if roles.note:
        eng.emit(ref, "note", roles.note)
    if roles.record_change is not None and not dry_run:
        record = remember_roles(eng.store, ref.key, record, roles, partial(eng.entry, ref))
    now = eng.now()
    policy = ref.settings.policy
    refused = fidelity.refusal(view, policy)
    if refused is not None:
        return refuse(eng, ref, record, action, refused, view, transition_at or now, dry_run)
    for u in view.unknown_members:  # all accepted by the policy, or refusal would have said so
        eng.emit(ref, "note", f"accepting the loss of {u.path} (policy accept_unknown_members)", member=u.path)
    if action == "start" and raise_to is None:
        # Patched by morning: an AMI update while the cluster is at zero comes first (engine.image_update).
        ready = image_update.before_start(eng, ref, record, view, dry_run, transition_at)
        if isinstance(ready, Result):
            return ready
        record, view = ready
    if raise_to is not None:
        plan = planner.plan_raise(view, raise_to)
    elif action == "stop":
        plan = planner.plan_stop(view, record, now, transition_id)
    else:
        plan = planner.plan_start(view, record)
    if isinstance(plan, planner.Skip):
        eng.emit(ref, "skip", plan.reason)
        return Result(ref.name, "skip", plan.reason)
    if isinstance(plan, planner.Refuse):
        how = f"{ref.command('forget')} drops the recorded sizes, then start it by hand"
        return refuse(eng, ref, record, action, f"{plan.reason}; {how}", view, transition_at or now, dry_run)
    if isinstance(plan, planner.Noop):
        done = noop(eng, ref, record, action, plan, transition_at or now, dry_run)
        return followed or done  # nothing more than the update followed: that is the answer
    if action == "stop":
        guarded = guard_round.run(eng, ref, record, view, plan, transition_at or now, dry_run, origin)
        if isinstance(guarded, Result):
            return guarded
        if isinstance(guarded, planner.Noop):
            kept = _everything_kept(view)
            done = noop(eng, ref, record, action, guarded, transition_at or now, dry_run, kept)
            return followed or done
        plan = guarded
    request = build_update(view, plan.counts, policy)
    targets = {name: count for name, (count, _) in plan.counts.items()}
    for note in plan.notes:
        eng.emit(ref, "note", note)
    if dry_run:
        eng.emit(ref, "dry-run", f"would {action}: {targets_text(view, targets)}", request=request)
        return Result(ref.name, "dry-run", f"would {action}")
    base = record or ClusterRecord.new(ref.key, now)
    pending = PendingAction(
        transition_id=transition_id,
        action=action,
        phase="intent",
        request_digest=request_digest(request),
        created_at=now,
        updated_at=now,
        targets=targets,
        transition_at=transition_at or now,
        origin=origin,
    )
    changes: dict[str, Any] = {"pending": pending, "updated_at": now, "refused": None, **ended(base, now, origin)}
    if plan.snapshot is not None:
        changes["snapshot"] = plan.snapshot
    try:
        stored = eng.store.put(base.evolve(**changes), expected_version=record.version if record else None)
    except ConflictError:
        eng.emit(ref, "skip", "another runner is acting on this cluster")
        return Result(ref.name, "skip", "another runner is acting on this cluster")
    crashpoints.reached("after-intent")
    if plan.snapshot is not None:
        sizes = {n: s.count for n, s in plan.snapshot.sizes.items()}
        eng.emit(ref, "note", f"recorded sizes {sizes_text(sizes)}", sizes=sizes)
    return send(eng, ref, stored, view, request, action, targets, reason, wait, poll_seconds)


def refuse(
    eng: Engine,
    ref: ClusterRef,
    record: ClusterRecord | None,
    action: planner.Action,
    reason: str,
    view: ClusterView,
    at: datetime,
    dry_run: bool,
) -> Result:
    """No update may go to this cluster: say so, remember it for `status`, and consume the transition
    (as a blocked stop does) so a schedule does not retry it every tick; the next one tries again."""
    members = [u.as_dict() for u in fidelity.unaccepted_members(view, ref.settings.policy)]
    eng.emit(ref, "refused", f"{action} refused: {reason}", members=members)
    if not dry_run:
        stays: planner.State = "running" if action == "stop" else "stopped"
        line = eng.entry(ref, action, "refused", reason=reason, members=members)
        now = eng.now()
        base = record or ClusterRecord.new(ref.key, now)
        with contextlib.suppress(ConflictError):
            eng.store.put(
                base.evolve(
                    applied_state=stays if base.applied_state is None else base.applied_state,
                    applied_transition_at=base.applied_from(at),
                    refused=Refusal(at=now, action=action, reason=reason),
                    pending=None,  # an unsent intent being planned again is dropped with it
                    updated_at=now,
                ),
                expected_version=record.version if record else None,
                history=[line],
            )
    return Result(ref.name, "refused", reason)


def noop(
    eng: Engine,
    ref: ClusterRef,
    record: ClusterRecord | None,
    action: planner.Action,
    noop: planner.Noop,
    at: datetime,
    dry_run: bool,
    detail: Mapping[str, Any] | None = None,
) -> Result:
    """Nothing to send: remember the state as applied (so the transition is not retried) and say why."""
    if not dry_run:
        line = eng.entry(ref, action, "noop", reason=noop.reason, **(detail or {}))
        mark_applied(eng, ref, record, noop.state, at, line, noop.snapshot)
    eng.emit(ref, "noop", noop.reason)
    return Result(ref.name, "noop", noop.reason)


def send(
    eng: Engine,
    ref: ClusterRef,
    record: ClusterRecord,
    view: ClusterView,
    request: Mapping[str, Any],
    action: planner.Action,
    targets: Mapping[str, int],
    reason: str,
    wait: bool,
    poll_seconds: float,
) -> Result:
    eng.about_to_change(ref)
    try:
        eng.client(ref).update_cluster(**request)
    except ClientError as exc:
        err = exc.response.get("Error", {})
        code = err.get("Code", "")
        answer = f"{code}: {err.get('Message', '')}"
        # A refusal may also be what a retry met after the first attempt was applied: look first.
        fate = None if code == "ResourceNotFound" else eng.fate_now(ref, targets)
        if fate != "out":
            if code in _CHECK_REFUSALS and fate is not None and _health_checks_running(err):
                return checks_wait(eng, ref, record, action, answer)
            if code in _REFUSALS and (fate is not None or code == "ResourceNotFound"):
                # Not accepted: nothing is in flight, so the intent is withdrawn (the snapshot stays),
                # and anything a guard drained for this stop is given back.
                message = f"UpdateCluster refused: {answer}"
                clear_pending(eng, ref, record, eng.entry(ref, action, "refused", error=message))
                if action == "stop":
                    guard_round.after_start(eng, ref, view, view.targets())
                kind = "skip" if code == "ConflictException" else "error"
                eng.emit(ref, kind, message)
                return Result(ref.name, kind, message)
            return unknown(eng, ref, action, f"UpdateCluster answered {answer}")
        eng.emit(
            ref,
            "note",
            f"UpdateCluster answered {answer}, but the cluster is at this {action}'s targets: "
            "it went out (an earlier attempt was applied)",
        )
    except BotoCoreError as exc:
        if eng.fate_now(ref, targets) != "out":
            return unknown(eng, ref, action, f"UpdateCluster: {exc}")
        eng.emit(ref, "note", f"UpdateCluster: {exc}; the cluster is at this {action}'s targets: it went out")
    crashpoints.reached("after-send")
    pending = record.pending
    assert pending is not None
    now = eng.now()
    sent = pending.evolve(phase="sent", updated_at=now)
    if action == "start":
        checks = {g.name: bool(g.details.get("OnStartDeepHealthChecks")) for g in view.groups}
        sent = sent.evolve(phases=phases.begin(targets, view.currents(), checks, now))
    waited = record.checks_wait
    # The "sent" mark need not be fsynced: lost with a power loss, it is what a crash at after-send
    # leaves (the intent, whose fate the next look reads from the cluster's target counts), so a
    # transition costs two durable commits, its intent and its outcome (docs/reliability.md). A start's
    # mark also carries the start of its phases (engine/phases): lost, that one start is followed and
    # timed as a whole, without its per-group phases; no size and no transition depends on them.
    record = eng.store.put(
        record.evolve(pending=sent, checks_wait=None, updated_at=now),
        expected_version=record.version,
        durable=False,
    )
    crashpoints.reached("after-sent")
    if waited is not None:
        eng.emit(
            ref,
            "note",
            f"{action} sent after waiting {duration_text((now - waited.since).total_seconds())} for deep health checks",
        )
    eng.emit(ref, "sent", f"{action} sent ({reason}): {targets_text(view, targets)}", targets=dict(targets))
    if wait:
        return settling.follow(eng, ref, wait=True, poll_seconds=poll_seconds)
    return Result(ref.name, "sent", f"{action} sent")


def unknown(eng: Engine, ref: ClusterRef, action: planner.Action, why: str) -> Result:
    """The call may or may not have gone out: the intent stays, and the next look decides from the
    cluster's target counts whether to follow it or to plan again (never re-sent blind)."""
    message = f"{why}; whether the {action} went out is decided at the next look from the cluster's target counts"
    eng.emit(ref, "error", message)
    return Result(ref.name, "error", message)


def checks_wait(eng: Engine, ref: ClusterRef, record: ClusterRecord, action: planner.Action, answer: str) -> Result:
    """UpdateCluster refused while deep health checks run: not a failure. The intent is withdrawn
    (nothing went out) and the same transition is sent again at the next look, until the settle
    timeout after the first refusal; then it is a failure."""
    pending = record.pending
    assert pending is not None
    now = eng.now()
    earlier = record.checks_wait
    if earlier is not None and earlier.transition_id == pending.transition_id and earlier.action == action:
        wait = earlier.evolve(attempts=earlier.attempts + 1)
    else:
        wait = ChecksWait(transition_id=pending.transition_id, action=action, since=now)
    waited = (now - wait.since).total_seconds()
    if now - wait.since >= eng.settle_timeout:
        message = (
            f"{action} still refused after {duration_text(waited)} of deep health checks "
            f"(settle timeout {duration_text(eng.settle_timeout.total_seconds())}): {answer}"
        )
        line = eng.entry(ref, action, "failed", waited, error=message, attempts=wait.attempts)
        updated = record.evolve(
            pending=None,
            checks_wait=None,
            applied_transition_at=record.applied_from(pending.transition_at),
            # Given up on: a hold asking for it again at every tick would fail again at every timeout.
            refused=Refusal(at=now, action=action, reason=message),
            updated_at=now,
        )
        with contextlib.suppress(ConflictError):
            eng.store.put(updated, expected_version=record.version, history=[line])
        eng.emit(ref, "failed", message)
        return Result(ref.name, "failed", message)
    # A schedule's or a hold's transition is due again at the next tick; a person's command is not.
    again = "sent again at the next look" if pending.served_by() != "manual" else "not sent (--wait waits and sends it)"
    message = f"{action} waits: deep health checks are in progress (attempt {wait.attempts}); {again}"
    history = []
    if wait.attempts == 1:  # one line per wait, not one per look
        history = [eng.entry(ref, action, "waiting", error=answer, reason="deep health checks in progress")]
    with contextlib.suppress(ConflictError):
        eng.store.put(
            record.evolve(pending=None, checks_wait=wait, updated_at=now),
            expected_version=record.version,
            history=history,
        )
    eng.emit(ref, "waiting", message)
    return Result(ref.name, "waiting", message)


def ended(record: ClusterRecord, now: datetime, origin: Origin | None = None) -> dict[str, Any]:
    """What a new transition ends: the retry of an earlier start (unless this is that retry) and a hold
    that has lapsed. Retries, waits and holds belong to the transition they serve."""
    changes: dict[str, Any] = {}
    if record.retry is not None and origin != "retry":
        changes["retry"] = None
    if record.hold is not None and not record.hold.active(now):
        changes["hold"] = None
    return changes


def mark_applied(
    eng: Engine,
    ref: ClusterRef,
    record: ClusterRecord | None,
    state: planner.State,
    at: datetime,
    line: HistoryEntry,
    snapshot: Snapshot | None = None,
) -> None:
    """A transition carried out without an update (nothing to send, or a blocked stop). ``snapshot``:
    the sizes a stop that sent nothing still records."""
    now = eng.now()
    base = record or ClusterRecord.new(ref.key, now)
    applied = base.applied_from(at)
    changes: dict[str, Any] = {
        "applied_state": state,
        "applied_transition_at": applied,
        "pending": None,
        "updated_at": now,
    }
    if snapshot is not None:
        changes["snapshot"] = snapshot
    # A conflict means another runner recorded the same conclusion (and its own history line).
    with contextlib.suppress(ConflictError):
        eng.store.put(
            base.evolve(**changes, **ended(base, now)),
            expected_version=record.version if record else None,
            history=[line],
        )


def clear_pending(eng: Engine, ref: ClusterRef, record: ClusterRecord, line: HistoryEntry) -> None:
    with contextlib.suppress(ConflictError):
        eng.store.put(
            record.evolve(pending=None, updated_at=eng.now()), expected_version=record.version, history=[line]
        )


def _health_checks_running(err: Mapping[str, Any]) -> bool:
    text = str(err.get("Message", "")).lower()
    return "health check" in text and "in progress" in text


def _everything_kept(view: ClusterView) -> dict[str, Any]:
    """A stop whose every group with nodes is protected sends nothing; its line still says what stayed
    up, in a settled stop's shape, so the cost report can show what such a night costs (kept, not saved)."""
    kept = [
        GroupOutcome(group=g.name, outcome="kept" if g.target else "stopped", current=g.current, target=g.target)
        for g in view.groups
    ]
    sizes = {
        g.name: {
            "count": max(g.current, g.target),
            "instance_type": g.instance_type,
            "instance_types": list(g.instance_types),
        }
        for g in view.groups
    }
    return {"outcomes": outcomes_detail(kept), "sizes": sizes}
