"""What to do with one cluster, as pure functions of (record, schedule state, cluster view, now).

Two steps keep a quiet tick free of API calls: ``due`` decides from the stored record and the schedule
alone whether anything might be needed; only then does the caller describe the cluster and ask
``plan_stop`` / ``plan_start`` / ``assess`` what exactly to send or record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from hyperpod_scheduler.aws.failures import FailureCause
from hyperpod_scheduler.cluster.storage import storage_members
from hyperpod_scheduler.cluster.view import ClusterView, GroupView
from hyperpod_scheduler.store.records import (
    ClusterRecord,
    GroupOutcome,
    GroupSize,
    Hold,
    Origin,
    Outcome,
    RetryState,
    Snapshot,
    request_digest,
)

State = Literal["running", "stopped"]
Action = Literal["stop", "start"]


def action_for(state: State) -> Action:
    return "start" if state == "running" else "stop"


@dataclass(frozen=True)
class ScheduleState:
    """What the schedule says at ``now``: the desired state and the latest transition at or before now."""

    desired: State
    last_transition_at: datetime | None
    allowed: frozenset[Action] = frozenset({"stop", "start"})
    why: str = ""  # a ready-by start issued early: by how much and why


@dataclass(frozen=True)
class Due:
    """Work for this tick. ``follow`` means an update we sent is still settling."""

    kind: Literal["stop", "start", "follow", "check"]
    transition_id: str
    reason: str
    transition_at: datetime | None = None
    origin: Origin = "schedule"


def effective_hold(record: ClusterRecord | None, now: datetime) -> State | None:
    if record is None or record.hold is None:
        return None
    if record.hold.until is not None and record.hold.until <= now:
        return None
    return record.hold.state


def hold_refusal(record: ClusterRecord | None, now: datetime, action: Action, release: str) -> str | None:
    """Why a person's ``action`` now is refused: the record's hold wants the other state, so the next
    tick would carry the hold out again and reverse it (None: no such hold); ``release`` is the command
    that ends the hold (``ClusterRef.command``). The stop itself
    (``engine.acting.act``) and its forecast (``engine.stop_forecast``) both ask this."""
    held = effective_hold(record, now)
    if held is None or action_for(held) == action or record is None or record.hold is None:
        return None
    hold = record.hold
    ends = f"until {hold.until:%Y-%m-%d %H:%M}Z" if hold.until else "until released"
    return (
        f"held {held} {ends} by {hold.by}"
        + (f" ({hold.reason})" if hold.reason else "")
        + f": a {action} now would be reversed by the next tick; {release} first"
    )


def live_retry(record: ClusterRecord | None, sched: ScheduleState, now: datetime) -> RetryState | None:
    """The record's start retry while it still serves its own transition: before its deadline, and no
    schedule transition since the start it retries (a retry is that start's, never the next morning's)."""
    retry = record.retry if record is not None else None
    if retry is None or retry.deadline <= now:
        return None
    last = sched.last_transition_at
    if retry.transition_at is not None and last is not None and last > retry.transition_at:
        return None
    return retry


def lapsed_hold(record: ClusterRecord | None, now: datetime) -> bool:
    """A hold that ended by its ``until`` and whose end nothing has applied yet: the schedule resumes
    once, then decides as usual (a lapsed hold never overrides later manual commands)."""
    if record is None or record.hold is None or record.hold.active(now):
        return False
    until = record.hold.until
    applied = record.applied_transition_at
    return applied is None or until is None or applied < until


def _instant_id(action: Action, at: datetime | None) -> str:
    # Stable for as long as the transition is the same one, whatever tick asks: a wait, a retry and a
    # refusal belong to it (an id made from the tick's own time would make every tick a new transition).
    return f"{action}@{at.isoformat() if at is not None else 'always'}"


def due(record: ClusterRecord | None, sched: ScheduleState, *, enforced: bool, now: datetime) -> Due | None:
    """Whether this cluster needs attention this tick, decided without any API call."""
    if record is not None and record.pending is not None:
        return Due("follow", record.pending.transition_id, f"following {record.pending.action}")
    lived = [t for t in (record.applied_transition_at, record.resumed_at) if t is not None] if record else []
    if any(t > now for t in lived):
        # The clock is behind a transition already applied, or a release (stepped back): nothing is
        # decided from a past the record has already lived through.
        return None
    held = effective_hold(record, now)
    retry = live_retry(record, sched, now)
    if retry is not None and (held or sched.desired) == "running" and retry.next_at <= now:
        return Due(
            "start",
            f"{retry.transition_id}#retry{retry.attempt}",
            f"retry {retry.attempt} after {retry.reason}",
            transition_at=retry.transition_at,
            origin="retry",
        )
    if held is not None:
        assert record is not None and record.hold is not None
        if record.applied_state == held or _given_up(record, record.hold, action_for(held)):
            return None
        return Due(action_for(held), hold_transition_id(record.hold, action_for(held)), f"held {held}", origin="hold")
    action = action_for(sched.desired)
    if action not in sched.allowed:
        return None
    never_applied = record is None or record.applied_transition_at is None or lapsed_hold(record, now)
    at = sched.last_transition_at
    if never_applied:
        if record is not None and reached(record, sched.desired) and not enforced:
            # Already there: one look records the transition lived through (so a clock stepped back
            # later does not take the older wish for the resumed schedule's); then ticks are quiet.
            return None if at is None else Due("check", _instant_id(action, at), f"schedule resumed: {action}", at)
        why = "first run for this cluster" if record is None else "schedule resumed"
        return Due(action, _instant_id(action, at), why, at)
    assert record is not None and record.applied_transition_at is not None
    if at is not None and at > record.applied_transition_at:
        said = sched.why or f"schedule turned {sched.desired} at {at.isoformat()}"
        return Due(action, _instant_id(action, at), said, at)
    if enforced:
        return Due("check", _instant_id(action, at), f"enforced: keep {sched.desired}", at)
    return None


def reached(record: ClusterRecord, state: State) -> bool:
    """The record's applied state is where the cluster is: an update settled with a group failed or
    short (a start rolled back for capacity, its retries run out) was asked for, not reached, so a
    resumed schedule sends it again rather than taking "running" for a cluster still at zero."""
    if record.applied_state != state:
        return False
    return not any(o.outcome in ("failed", "partial") for o in record.last_outcomes)


def _given_up(record: ClusterRecord, hold: Hold, action: Action) -> bool:
    """This hold's own update was refused for good (a wait past the settle timeout): it is not asked
    for again at every tick; setting the hold again, or releasing it, tries again."""
    refused = record.refused
    return refused is not None and refused.action == action and hold.since is not None and refused.at >= hold.since


def hold_transition_id(hold: Hold, action: Action) -> str:
    """One id per hold: every tick that carries it out serves the same transition."""
    since = hold.since.isoformat() if hold.since is not None else request_digest(hold.model_dump(mode="json"))[7:23]
    return f"hold-{action}@{since}"


# ---- after DescribeCluster -------------------------------------------------------------------------


@dataclass(frozen=True)
class Skip:
    reason: str


@dataclass(frozen=True)
class Noop:
    """Nothing to send; record the state as applied (and say why)."""

    state: State
    reason: str
    snapshot: Snapshot | None = None


@dataclass(frozen=True)
class Refuse:
    """No update may go out: sending it would act on something else than what was recorded."""

    reason: str


@dataclass(frozen=True)
class Send:
    action: Action
    counts: Mapping[str, tuple[int, int | None]]  # group -> (InstanceCount, MinInstanceCount)
    snapshot: Snapshot | None  # the sizes to remember before a stop
    notes: tuple[str, ...] = field(default_factory=tuple)


Plan = Skip | Noop | Refuse | Send


def snapshot_for_stop(
    view: ClusterView, previous: Snapshot | None, applied: State | None, now: datetime, transition_id: str
) -> tuple[Snapshot, tuple[str, ...]]:
    """The sizes to remember. A group at 0 keeps its earlier recorded size only while the cluster was
    stopped by us (someone restarted part of it by hand); zeroed by hand during the day, 0 is what the
    user meant and is recorded as such."""
    sizes: dict[str, GroupSize] = {}
    notes: list[str] = []
    if previous is not None and previous.cluster_arn is not None and previous.cluster_arn != view.arn:
        # Re-created since (a new ARN): nothing recorded is this cluster's, so nothing is carried into its
        # own sizes (stamped with its ARN, the old sizes would pass for its own at the next start).
        notes.append(
            f"the cluster was replaced since its sizes were recorded ({previous.cluster_arn}): recording its own"
        )
        previous = None
    for g in view.groups:
        size = max(g.target, g.current)
        recorded = previous.sizes.get(g.name) if previous is not None else None
        if previous is not None and recorded is not None and _other_type(recorded, g):
            # Replaced by a group of the same name running another type: the recorded size is not its own.
            notes.append(f"group '{g.name}' was {recorded.type_text}, now {g.type_text}: recording its own size")
            previous = previous.evolve(sizes={n: z for n, z in previous.sizes.items() if n != g.name})
        if size == 0 and previous is not None and applied == "stopped" and g.name in previous.sizes:
            sizes[g.name] = previous.sizes[g.name]
            notes.append(f"group '{g.name}' is at 0: keeping its recorded size {previous.sizes[g.name].count}")
            continue
        ours = previous is not None and g.name in previous.sizes and previous.kept.get(g.name) == size
        if ours and previous is not None:
            # Our own stop left it at this floor and no start has restored it since (a start that
            # restores a group drops it from ``kept``; one that rolled back leaves it there): the
            # morning restores its size before the floor.
            sizes[g.name] = previous.sizes[g.name]
            continue
        if previous is not None and g.name in previous.sizes and previous.sizes[g.name].count != size:
            notes.append(
                f"group '{g.name}' was resized by hand to {size} (recorded {previous.sizes[g.name].count}): "
                f"remembering {size}"
            )
        sizes[g.name] = GroupSize(
            count=size,
            min_count=g.min_count,
            instance_type=g.instance_type,
            instance_types=list(g.instance_types),
            image_id=g.image_id,
            image_release=g.image_release,
            health_checks=bool(g.details.get("OnStartDeepHealthChecks")),
        )
    snapshot = Snapshot(
        taken_at=now,
        sizes=sizes,
        transition_id=transition_id,
        reason="stop",
        cluster_arn=view.arn,
        storage=storage_members(view.raw),  # for report's FSx discovery: no DescribeCluster of its own
    )
    return snapshot, tuple(notes)


def _other_type(recorded: GroupSize, group: GroupView) -> bool:
    """Whether the group runs other types than were recorded: a plain or a flexible group's (every type
    it may run), so a c5 group replaced by a flexible P5 one of the same name is not taken for it."""
    was, now = set(recorded.types), set(group.instance_types) or {t for t in (group.instance_type,) if t}
    return bool(was and now and was != now)


def plan_stop(view: ClusterView, record: ClusterRecord | None, now: datetime, transition_id: str) -> Plan:
    if view.busy:
        return Skip(f"{view.busy_reason()}: not touched this tick")
    previous = record.snapshot if record else None
    if view.all_zero:
        why = "already stopped; recorded sizes kept" if previous else "already stopped; nothing to record"
        return Noop("stopped", why)
    applied = record.applied_state if record else None
    snapshot, notes = snapshot_for_stop(view, previous, applied, now, transition_id)
    counts = {g.name: (0, 0 if g.min_count is not None else None) for g in view.groups}
    return Send("stop", counts, snapshot, notes)


def replaced(view: ClusterView, snapshot: Snapshot) -> str | None:
    """What is no longer the cluster or the groups the sizes were recorded from, or None. A size is only
    ever restored onto the same cluster (its ARN) and a group that runs the same instance type."""
    if snapshot.cluster_arn is not None and snapshot.cluster_arn != view.arn:
        return (
            f"the cluster was replaced while stopped (recorded {snapshot.cluster_arn}, now {view.arn}): its "
            "recorded sizes are not restored onto another cluster"
        )
    changed = []
    for g in view.groups:
        recorded = snapshot.sizes.get(g.name)
        if recorded is not None and _other_type(recorded, g):
            changed.append(f"'{g.name}' was {recorded.type_text}, now {g.type_text}")
    if changed:
        return f"group {'; '.join(changed)} (replaced while stopped): its recorded size is not restored onto it"
    return None


def plan_start(view: ClusterView, record: ClusterRecord | None) -> Plan:
    snapshot = record.snapshot if record else None
    if snapshot is None:
        return Noop("running", "nothing recorded for this cluster: start does nothing")
    if view.busy:
        return Skip(f"{view.busy_reason()}: not touched this tick")
    why = replaced(view, snapshot)
    if why is not None:
        return Refuse(why)
    counts: dict[str, tuple[int, int | None]] = {}
    notes: list[str] = []
    for g in view.groups:
        recorded = snapshot.sizes.get(g.name)
        if recorded is None:
            notes.append(f"group '{g.name}' has no recorded size (added since the stop): left at {g.target}")
            continue
        kept_at = snapshot.kept.get(g.name)
        if kept_at is not None and g.target == kept_at:
            if g.target != recorded.count:
                counts[g.name] = (recorded.count, recorded.min_count)
            continue
        if g.target > 0 and g.target != recorded.count:
            notes.append(f"group '{g.name}' was set to {g.target} by hand while stopped: keeping {g.target}")
            continue
        counts[g.name] = (recorded.count, recorded.min_count)
    for name in sorted(set(snapshot.sizes) - {g.name for g in view.groups}):
        notes.append(f"group '{name}' was recorded but no longer exists: skipped")
    if all(view.targets().get(n) == c for n, (c, _) in counts.items()):
        return Noop("running", "already at the recorded sizes")
    return Send("start", counts, None, tuple(notes))


def plan_raise(view: ClusterView, wanted: Mapping[str, int]) -> Plan:
    """Raise the named groups to ``wanted`` (a training plan's group whose reserved block became
    Active); a group already there, or above, is left as it is."""
    if view.busy:
        return Skip(f"{view.busy_reason()}: not touched this tick")
    counts: dict[str, tuple[int, int | None]] = {}
    for name, count in wanted.items():
        g = view.group(name)
        if g is not None and g.target < count:
            counts[name] = (count, g.min_count)
    if not counts:
        return Noop("running", "already at the plan's reserved count")
    return Send("start", counts, None, ())


def apply_floors(plan: Send, view: ClusterView, floors: Mapping[str, int]) -> Send | Noop:
    """A stop that leaves ``floors`` groups running at those counts (they are remembered as kept)."""
    if not floors:
        return plan
    counts = dict(plan.counts)
    kept: dict[str, int] = {}
    for name, floor in floors.items():
        g = view.group(name)
        if g is None:
            continue
        # A stop never raises a target, whatever a guard asked or a DescribeCluster answer claims (an
        # answer with target 0 and current 4 is a group on its way down).
        floor = min(floor, g.target)
        kept[name] = floor
        counts[name] = (floor, None if g.min_count is None else min(g.min_count, floor))
    snapshot = plan.snapshot.evolve(kept=kept) if plan.snapshot is not None else None
    if all(view.targets().get(n) == c for n, (c, _) in counts.items()):
        # Nothing is sent, but the sizes are recorded all the same: the morning restores today's sizes,
        # not an older night's (a group zeroed by hand today stays at zero).
        return Noop("stopped", "every group with nodes is protected: nothing to stop", snapshot)
    return Send(plan.action, counts, snapshot, plan.notes)


# ---- following an update ---------------------------------------------------------------------------

Fate = Literal["out", "busy", "unsent"]


def superseded(record: ClusterRecord, sched: ScheduleState, now: datetime) -> str | None:
    """Why an unsent intent no longer serves what is wanted now (then it is withdrawn), or None.

    The newest word wins: an active hold over everything; a hold's intent ends with its hold; a schedule
    transition after the intent's moment over the intent (whatever asked for it); and a schedule's or a
    retry's intent must still be what the schedule wants (its expression may have changed)."""
    pending = record.pending
    assert pending is not None
    held = effective_hold(record, now)
    if held is not None:
        return None if action_for(held) == pending.action else f"the cluster is held {held}"
    origin = pending.served_by()
    if origin == "hold":
        return "the hold it served has ended"
    served_at = pending.transition_at or pending.created_at
    last = sched.last_transition_at
    if last is not None and last > served_at:
        return f"the schedule turned {sched.desired} at {last.isoformat()}, after it"
    if origin in ("schedule", "retry") and action_for(sched.desired) != pending.action:
        return f"the schedule now wants the cluster {sched.desired}"
    return None


def overtaken(record: ClusterRecord, sched: ScheduleState, now: datetime) -> str | None:
    """Why an update still settling no longer serves what is wanted (the schedule has turned the other
    way since its transition), or None. A hold keeps its own update; a person's command is followed."""
    pending = record.pending
    if pending is None or pending.phase != "sent" or effective_hold(record, now) is not None:
        return None
    wanted = action_for(sched.desired)
    last = sched.last_transition_at
    served_at = pending.transition_at or pending.created_at
    if wanted == pending.action or wanted not in sched.allowed or last is None or last <= served_at:
        return None
    return f"the schedule turned {sched.desired} at {last.isoformat()} while the {pending.action} was settling"


def intent_fate(view: ClusterView, targets: Mapping[str, int]) -> Fate:
    """Did an update with these target counts go out? Decided from the cluster's own targets only
    (UpdateCluster sets them the moment it is accepted): ``out`` when they are ours; ``busy`` when they
    are not but the cluster is changing (someone else's update: wait and decide after it); else
    ``unsent``."""
    if all((g := view.group(name)) is not None and g.target == count for name, count in targets.items()):
        return "out"
    return "busy" if view.busy else "unsent"


@dataclass(frozen=True)
class InProgress:
    detail: str


@dataclass(frozen=True)
class Settled:
    state: State
    outcomes: tuple[GroupOutcome, ...]
    ok: bool
    detail: str


Assessment = InProgress | Settled


def assess(
    view: ClusterView,
    action: Action,
    targets: Mapping[str, int],
    started: datetime,
    now: datetime,
    timeout: timedelta,
    kept: Mapping[str, int] | None = None,
) -> Assessment:
    """Has the update we sent settled? Rollbacks and timeouts settle with per-group outcomes."""
    if view.status in ("RollingBack", "Updating", "Creating", "SystemUpdating"):
        return InProgress(f"cluster is {view.status}")
    rolled_back = view.status == "InService" and any(
        (g := view.group(name)) is not None and g.target != want for name, want in targets.items()
    )
    timed_out = now - started >= timeout
    outcomes: list[GroupOutcome] = []
    pending = False
    kind: Outcome
    for name, want in targets.items():
        g = view.group(name)
        if g is None:
            outcomes.append(GroupOutcome(group=name, outcome="failed", current=0, target=want, detail="group vanished"))
            continue
        if g.current == want:
            kind = (
                "kept"
                if action == "stop" and kept and name in kept
                else ("stopped" if action == "stop" else "restored")
            )
            outcomes.append(GroupOutcome(group=name, outcome=kind, current=g.current, target=want, detail=""))
        elif rolled_back or view.status == "Failed":
            detail = view.failure_message or f"cluster {view.status}; group target is {g.target}"
            cause = view.failure_cause or FailureCause.OTHER  # a rollback AWS gave no words for: not capacity
            outcomes.append(
                GroupOutcome(group=name, outcome="failed", current=g.current, target=want, detail=detail, cause=cause)
            )
        else:
            pending = True
            kind = "partial" if g.current > 0 or action == "start" else "failed"
            outcomes.append(
                GroupOutcome(group=name, outcome=kind, current=g.current, target=want, detail=f"{g.current} of {want}")
            )
    state: State = "stopped" if action == "stop" else "running"
    if rolled_back or view.status == "Failed":
        return Settled(state, tuple(outcomes), False, view.failure_message or f"cluster {view.status}")
    if pending and not timed_out:
        done = sum(1 for o in outcomes if o.outcome in ("stopped", "restored", "kept"))
        moving = ", ".join(f"{o.group} {o.current}/{o.target}" for o in outcomes if o.outcome in ("partial", "failed"))
        return InProgress(f"{done}/{len(outcomes)} groups settled; {moving}")
    ok = all(o.outcome in ("stopped", "restored", "kept") for o in outcomes)
    return Settled(state, tuple(outcomes), ok, "settled" if ok else f"not settled after {timeout}")
