"""The planner's decisions as tables: what a stop remembers, what a start restores, when a tick acts."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hyperpod_scheduler.engine import planner
from hyperpod_scheduler.engine.planner import Noop, ScheduleState, Send, Skip
from hyperpod_scheduler.store.records import ClusterRecord, GroupSize, Hold, PendingAction, Snapshot
from tests.engine.builders import T0, cluster, group


def record(**kw: object) -> ClusterRecord:
    return ClusterRecord.new("default/us-east-1/c1", T0).evolve(**kw)


def snap(**sizes: int) -> Snapshot:
    return Snapshot(taken_at=T0, sizes={k: GroupSize(count=v) for k, v in sizes.items()}, transition_id="t")


RUNNING = ScheduleState("running", T0 - timedelta(hours=1))
STOPPED = ScheduleState("stopped", T0 - timedelta(hours=1))


@pytest.mark.parametrize(
    ("rec", "sched", "enforced", "expected"),
    [
        (None, STOPPED, False, "stop"),  # first sight: apply the schedule
        (None, RUNNING, False, "start"),
        (
            record(applied_state="stopped", applied_transition_at=STOPPED.last_transition_at),
            STOPPED,
            False,
            None,
        ),
        # the schedule turned since we last applied it
        (
            record(applied_state="running", applied_transition_at=T0 - timedelta(hours=5)),
            STOPPED,
            False,
            "stop",
        ),
        # manual stop during a running window: not undone until the next transition
        (
            record(applied_state="stopped", applied_transition_at=RUNNING.last_transition_at),
            RUNNING,
            False,
            None,
        ),
        # ... unless the schedule is enforced
        (
            record(applied_state="stopped", applied_transition_at=RUNNING.last_transition_at),
            RUNNING,
            True,
            "check",
        ),
        # stop-only schedules never start
        (None, ScheduleState("running", None, frozenset({"stop"})), False, None),
    ],
)
def test_due_acts_only_at_transitions(rec, sched, enforced, expected) -> None:  # type: ignore[no-untyped-def]
    d = planner.due(rec, sched, enforced=enforced, now=T0)
    assert (d.kind if d else None) == expected


def test_pending_update_is_followed_before_anything_else() -> None:
    pending = PendingAction(
        transition_id="x", action="stop", phase="sent", request_digest="d", created_at=T0, updated_at=T0
    )
    d = planner.due(record(pending=pending), RUNNING, enforced=False, now=T0)
    assert d is not None and d.kind == "follow"


def test_hold_overrides_schedule_until_it_lapses() -> None:
    held = record(
        applied_state="stopped",
        applied_transition_at=T0,
        hold=Hold(state="running", until=T0 + timedelta(hours=2), by="ana"),
    )
    d = planner.due(held, STOPPED, enforced=False, now=T0)
    assert d is not None and d.kind == "start"
    # after the hold lapses the schedule resumes and wants the cluster stopped again
    lapsed = held.evolve(applied_state="running")
    d2 = planner.due(lapsed, STOPPED, enforced=False, now=T0 + timedelta(hours=3))
    assert d2 is not None and d2.kind == "stop"


def test_stop_records_each_group_and_zeroes_all() -> None:
    view = cluster(
        group("controller", 1, node_type="Controller"),
        group("gpu", 4, tier="custom"),
        group("cpu", 2, tier="ami+extension", min_count=1),
    )
    plan = planner.plan_stop(view, None, T0, "stop@t")
    assert isinstance(plan, Send)
    assert plan.snapshot is not None
    assert {n: s.count for n, s in plan.snapshot.sizes.items()} == {"controller": 1, "gpu": 4, "cpu": 2}
    assert plan.snapshot.sizes["cpu"].min_count == 1
    assert plan.counts == {"controller": (0, None), "gpu": (0, None), "cpu": (0, 0)}


def test_stop_of_stopped_cluster_keeps_recorded_sizes() -> None:
    view = cluster(group("controller", 0, node_type="Controller"), group("gpu", 0))
    rec = record(applied_state="stopped", snapshot=snap(controller=1, gpu=4))
    plan = planner.plan_stop(view, rec, T0, "stop@t")
    assert isinstance(plan, Noop) and "recorded sizes kept" in plan.reason


def test_partial_manual_restart_at_night_keeps_other_recorded_sizes() -> None:
    view = cluster(group("controller", 1, node_type="Controller"), group("gpu", 0), group("cpu", 3))
    rec = record(applied_state="stopped", snapshot=snap(controller=1, gpu=4, cpu=2))
    plan = planner.plan_stop(view, rec, T0, "stop@t")
    assert isinstance(plan, Send) and plan.snapshot is not None
    assert plan.snapshot.sizes["gpu"].count == 4  # not overwritten with 0
    assert plan.snapshot.sizes["cpu"].count == 3  # the newer size set by hand
    assert any("resized by hand" in n for n in plan.notes)


def test_group_zeroed_by_hand_during_the_day_is_remembered_as_zero() -> None:
    view = cluster(group("controller", 1, node_type="Controller"), group("gpu", 0))
    rec = record(applied_state="running", snapshot=snap(controller=1, gpu=4))
    plan = planner.plan_stop(view, rec, T0, "stop@t")
    assert isinstance(plan, Send) and plan.snapshot is not None
    assert plan.snapshot.sizes["gpu"].count == 0


@pytest.mark.parametrize("status", ["Updating", "SystemUpdating", "RollingBack", "Creating", "Failed"])
def test_busy_cluster_is_not_touched(status: str) -> None:
    view = cluster(group("controller", 1, node_type="Controller"), status=status)
    assert isinstance(planner.plan_stop(view, None, T0, "t"), Skip)
    assert isinstance(planner.plan_start(view, record(snapshot=snap(controller=1))), Skip)


def test_start_restores_each_group_to_its_own_size() -> None:
    view = cluster(group("controller", 0, node_type="Controller"), group("gpu", 0), group("cpu", 0))
    plan = planner.plan_start(view, record(snapshot=snap(controller=1, gpu=4, cpu=2)))
    assert isinstance(plan, Send)
    assert {n: c for n, (c, _) in plan.counts.items()} == {"controller": 1, "gpu": 4, "cpu": 2}


def test_start_with_nothing_recorded_does_nothing_and_says_so() -> None:
    view = cluster(group("controller", 0, node_type="Controller"))
    plan = planner.plan_start(view, None)
    assert isinstance(plan, Noop) and "nothing recorded" in plan.reason


def test_start_keeps_a_size_set_by_hand_while_stopped() -> None:
    view = cluster(group("controller", 0, node_type="Controller"), group("gpu", 2))
    plan = planner.plan_start(view, record(snapshot=snap(controller=1, gpu=4)))
    assert isinstance(plan, Send)
    assert "gpu" not in plan.counts and any("by hand" in n for n in plan.notes)


def test_assess_reports_rollback_with_failure_message() -> None:
    msg = "We currently do not have sufficient capacity for the requested instance type(s). Please try again."
    view = cluster(group("controller", 0, node_type="Controller"), group("gpu", 0), FailureMessage=msg)
    verdict = planner.assess(view, "start", {"controller": 1, "gpu": 4}, T0, T0, timedelta(hours=3))
    assert isinstance(verdict, planner.Settled) and not verdict.ok
    assert verdict.detail == msg
    assert all(o.outcome == "failed" for o in verdict.outcomes)


def test_assess_partial_in_continuous_until_timeout() -> None:
    view = cluster(group("controller", 1, node_type="Controller"), group("gpu", 2, 4))
    targets = {"controller": 1, "gpu": 4}
    early = planner.assess(view, "start", targets, T0, T0 + timedelta(minutes=20), timedelta(hours=3))
    assert isinstance(early, planner.InProgress)
    late = planner.assess(view, "start", targets, T0, T0 + timedelta(hours=4), timedelta(hours=3))
    assert isinstance(late, planner.Settled) and not late.ok
    gpu = next(o for o in late.outcomes if o.group == "gpu")
    assert (gpu.outcome, gpu.current, gpu.target) == ("partial", 2, 4)


def test_a_stop_never_raises_a_target_whatever_the_answer_claims() -> None:
    """Issue 28, item 9: an answer with a scarce group InService at target 0 and current 4 (on its way
    down) made the capacity guard keep it at max(current, target): the stop raised it 0 -> 4."""
    from hyperpod_scheduler.config.model import Policy
    from hyperpod_scheduler.guards.base import StopContext
    from hyperpod_scheduler.guards.capacity import CapacityGuard

    view = cluster(group("head", 1, node_type="Controller"), group("gpu", 4, 0, itype="ml.p5.48xlarge"))
    plan = planner.plan_stop(view, None, T0, "stop@t")
    assert isinstance(plan, Send)
    ctx = StopContext(cluster="c1", key="k", region="us-east-1", view=view, groups_to_zero=("head",), now=T0)
    verdict = CapacityGuard(Policy()).before_stop(ctx)
    guarded = planner.apply_floors(plan, view, verdict.floors)
    counts = guarded.counts if isinstance(guarded, Send) else {}
    targets = view.targets()
    assert all(count <= targets[name] for name, (count, _) in counts.items()), counts
