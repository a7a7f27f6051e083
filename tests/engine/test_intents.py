"""Intents that know their moment: what an unsent intent serves, and when it has been superseded."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from hyperpod_scheduler.engine import planner
from hyperpod_scheduler.engine.planner import ScheduleState
from hyperpod_scheduler.store.records import ClusterRecord, Hold, Origin, PendingAction
from tests.engine.builders import T0, cluster, group

EVENING = T0 - timedelta(hours=2)  # the intent's moment
MORNING = T0 - timedelta(minutes=30)  # a later transition


def pending(action: str, origin: Origin | None, at: datetime = EVENING, tid: str = "t") -> PendingAction:
    return PendingAction(
        transition_id=tid,
        action=action,  # type: ignore[arg-type]
        phase="intent",
        request_digest="d",
        created_at=at,
        updated_at=at,
        targets={"w": 0 if action == "stop" else 4},
        transition_at=at,
        origin=origin,
    )


def rec(p: PendingAction, hold: Hold | None = None) -> ClusterRecord:
    return ClusterRecord.new("111122223333/us-east-1/c1", T0).evolve(pending=p, hold=hold)


HELD_RUNNING = Hold(state="running", by="alice")
HELD_STOPPED = Hold(state="stopped", by="alice")
LAPSED = Hold(state="stopped", by="alice", until=T0 - timedelta(minutes=1))


@pytest.mark.parametrize(
    ("record", "sched", "superseded"),
    [
        # the morning came after last night's stop: whatever asked for it, it is stale
        (rec(pending("stop", "schedule")), ScheduleState("running", MORNING), True),
        (rec(pending("stop", "manual")), ScheduleState("running", MORNING), True),
        # nothing newer: the schedule's stop still stands, and so does a manual stop against the schedule
        (rec(pending("stop", "schedule")), ScheduleState("stopped", EVENING), False),
        (rec(pending("stop", "manual")), ScheduleState("running", EVENING - timedelta(hours=9)), False),
        # the schedule's expression changed under the intent (a config edit)
        (rec(pending("stop", "schedule")), ScheduleState("running", EVENING - timedelta(hours=9)), True),
        # an active hold wins; an intent agreeing with it stands
        (rec(pending("stop", "schedule"), HELD_RUNNING), ScheduleState("stopped", EVENING), True),
        (rec(pending("stop", "schedule"), HELD_STOPPED), ScheduleState("running", MORNING), False),
        # a hold's intent ends with its hold, released or lapsed
        (rec(pending("stop", "hold")), ScheduleState("stopped", EVENING - timedelta(hours=9)), True),
        (rec(pending("stop", "hold"), LAPSED), ScheduleState("stopped", EVENING - timedelta(hours=9)), True),
        (rec(pending("stop", "hold"), HELD_STOPPED), ScheduleState("running", MORNING), False),
        # a retry of a start is stale once the schedule turned off
        (rec(pending("start", "retry")), ScheduleState("stopped", MORNING), True),
        (rec(pending("start", "retry")), ScheduleState("running", EVENING - timedelta(hours=1)), False),
    ],
)
def test_when_an_unsent_intent_is_superseded(record: ClusterRecord, sched: ScheduleState, superseded: bool) -> None:
    why = planner.superseded(record, sched, T0)
    assert (why is not None) == superseded, why


@pytest.mark.parametrize(
    ("tid", "origin"),
    [("manual-stop@x", "manual"), ("dashboard-start@x", "manual"), ("hold-stop@x", "hold"),
     ("start@x#retry2", "retry"), ("stop@2026-11-30T18:00:00+00:00", "schedule")],
)  # fmt: skip
def test_intents_stored_before_origin_existed_are_read_from_their_transition_id(tid: str, origin: str) -> None:
    assert pending("stop", None, tid=tid).served_by() == origin


def test_whether_an_intent_went_out_is_decided_from_target_counts_only() -> None:
    ours = {"controller": 0, "w": 0}
    assert planner.intent_fate(cluster(group("controller", 1, 0), group("w", 4, 0), status="Updating"), ours) == "out"
    # Updating, but towards someone else's counts: not ours, whatever "busy" suggests
    assert planner.intent_fate(cluster(group("controller", 1), group("w", 4, 6), status="Updating"), ours) == "busy"
    assert planner.intent_fate(cluster(group("controller", 1), group("w", 4)), ours) == "unsent"
