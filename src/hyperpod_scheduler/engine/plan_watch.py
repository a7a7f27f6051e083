"""The training-plan watch, run after a cluster's turn in a tick: read each plan its groups run on
(DescribeTrainingPlan), warn before it ends, start its group when a reserved block becomes Active, and
keep count of the reserved hours that ran idle. The decisions are ``plans``'; this is the shell.

The plans a cluster's groups use are learned from the engine's own DescribeCluster answers (a tick
with nothing due makes no DescribeCluster for this), then remembered in the cluster's record; a plan
is looked at within the hour, and exactly when a block starts or ends or a warning falls due.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.engine import plans
from hyperpod_scheduler.engine.events import Event
from hyperpod_scheduler.engine.runner import ClusterRef, Engine
from hyperpod_scheduler.store.errors import ConflictError
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry, PlanWatch

RETRY_AFTER_ERROR = timedelta(minutes=15)


def watch_plans(engine: Engine, ref: ClusterRef, now: datetime) -> None:
    known = engine.accounts.known(ref) or ref
    learned = engine.plan_groups(ref)
    if not learned and engine.watched_no_plan(known):
        return  # nothing to watch, as the turn's own read of the record just found
    for _ in range(5):  # compare-and-set: another runner's write in between means read and do again
        record = engine.store.get(known.key)
        if record is None or (not record.plans and not learned):
            return
        watches = dict(record.plans)
        for arn, (groups, itype) in learned.items():
            base = watches.get(arn) or PlanWatch(arn=arn)
            watches[arn] = base.evolve(groups=sorted(groups), instance_type=itype)
        lines: list[HistoryEntry] = []
        events: list[Event] = []
        for arn, watch in list(watches.items()):
            if watch.next_look is not None and now < watch.next_look:
                continue
            watches[arn] = _look(engine, known, watch, now, lines, events)
        if watches == record.plans and not lines:
            break
        try:
            engine.store.put(
                record.evolve(plans=watches, updated_at=now), expected_version=record.version, history=lines
            )
        except ConflictError:
            continue
        for event in events:
            engine.events(event)
        break
    _start_wanted(engine, known, now)


def _start_wanted(engine: Engine, ref: ClusterRef, now: datetime) -> None:
    """Send the starts activations decided (remembered first, so a crash between the decision and the
    start retries it, under the same transition id); forget each once the engine took it."""
    record = engine.store.get(ref.key)
    for arn, watch in (record.plans if record else {}).items():
        if watch.start_wanted is None or not watch.groups or watch.start_id is None:
            continue
        name = plans.plan_name(arn)
        result = engine.raise_groups(
            ref,
            {watch.groups[0]: watch.start_wanted},
            transition_id=watch.start_id,
            reason=f"training plan {name}: reserved block Active",
        )
        if result.kind not in ("sent", "noop", "settled", "failed", "refused"):
            continue  # not taken (an error, someone else's update in flight): the next tick tries again
        for _ in range(5):
            current = engine.store.get(ref.key)
            if current is None or arn not in current.plans:
                break
            done = current.plans[arn].evolve(start_wanted=None, start_id=None)
            try:
                engine.store.put(
                    current.evolve(plans={**current.plans, arn: done}, updated_at=now),
                    expected_version=current.version,
                )
                break
            except ConflictError:
                continue


def _look(
    engine: Engine,
    ref: ClusterRef,
    watch: PlanWatch,
    now: datetime,
    lines: list[HistoryEntry],
    events: list[Event],
) -> PlanWatch:
    name = plans.plan_name(watch.arn)
    try:
        answer = engine.sagemaker(ref).describe_training_plan(TrainingPlanName=name)
    except (ClientError, BotoCoreError) as exc:
        why = exc.response.get("Error", {}).get("Code", "error") if isinstance(exc, ClientError) else str(exc)
        events.append(
            Event(now, ref.name, "error", f"training plan {name}: DescribeTrainingPlan: {why}", where=ref.where)
        )
        return watch.evolve(next_look=now + RETRY_AFTER_ERROR)
    facts = plans.read_plan(answer)
    if watch.seen_at is None:
        lines.append(_line(engine, ref, now, "watching", plan=watch.arn, status=facts.status, ends=facts.end))
    activate = plans.became_active(watch, facts)
    updated = plans.seen(watch, facts, now)
    groups = ", ".join(watch.groups) or "-"
    threshold, given = plans.warnings_due(facts.end, watch.warned, now)
    if threshold is not None and facts.end is not None:
        left = facts.end - now
        text = (
            f"training plan {name} ends {facts.end:%a %d %b %H:%M}Z (in {_days(left)}): group(s) {groups} lose "
            f"their {facts.total} reserved instance(s) then; renew it or plan the move"
        )
        events.append(Event(now, ref.name, "plan", text, {"plan": watch.arn, "days": threshold}, where=ref.where))
        lines.append(_line(engine, ref, now, "warned", plan=watch.arn, days=threshold, ends=facts.end))
    updated = updated.evolve(warned=given)
    if activate is not None:
        if len(watch.groups) == 1:
            group = watch.groups[0]
            events.append(
                Event(
                    now,
                    ref.name,
                    "note",
                    f"training plan {name}: {activate} reserved instance(s) Active: starting {group}",
                    where=ref.where,
                )
            )
            lines.append(_line(engine, ref, now, "active", plan=watch.arn, group=group, count=activate))
            updated = updated.evolve(activated_at=now, start_wanted=activate, start_id=f"plan-{name}-{now:%Y%m%dT%H%M}")
        else:
            events.append(
                Event(
                    now,
                    ref.name,
                    "plan",
                    f"training plan {name}: {activate} reserved instance(s) Active; groups {groups} share it, "
                    "so none is started automatically",
                    where=ref.where,
                )
            )
    if facts.status == "Expired" and watch.status not in (None, "Expired"):
        lines.append(_line(engine, ref, now, "expired", plan=watch.arn))
        events.append(
            Event(
                now,
                ref.name,
                "plan",
                f"training plan {name} has expired: group(s) {groups} lost its nodes",
                where=ref.where,
            )
        )
    return updated.evolve(next_look=plans.next_look(facts, updated.warned, now))


def _line(engine: Engine, ref: ClusterRef, now: datetime, outcome: str, **detail: object) -> HistoryEntry:
    return HistoryEntry(key=ref.key, at=now, action="plan", actor=engine.actor, outcome=outcome, detail=detail)


def _days(left: timedelta) -> str:
    hours = left.total_seconds() / 3600
    return f"{hours / 24:.1f} days" if hours >= 24 else f"{hours:.0f} hours"


__all__ = ["ClusterRecord", "watch_plans"]
