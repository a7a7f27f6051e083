"""Stop and start over the emulator through boto3: every group zeroed and restored to its own size."""

from __future__ import annotations

from datetime import timedelta

from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, ref_for, schedule_state, tick, turn
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.memory import MemoryStore
from hyperpod_scheduler.store.records import PendingAction, request_digest
from tests.engine.conftest import CountingClient, settle, three_tier_request

REF = ref_for("c1", "us-east-1", account=DEFAULT_ACCOUNT)  # the emulator's clusters belong to it


def _groups(d: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {g["InstanceGroupName"]: g for g in d["InstanceGroups"]}


def test_stop_then_start_three_tiers(
    emu: Emulator, counting: CountingClient, engine: tuple[Engine, Collector, MemoryStore]
) -> None:
    eng, _events, store = engine
    client = counting.client
    client.create_cluster(**three_tier_request())
    before = _groups(settle(emu, client, "c1"))
    assert {n: g["CurrentCount"] for n, g in before.items()} == {"controller": 1, "dev": 2, "train": 3}

    result = eng.act(REF, "stop", transition_id="stop-1", wait=True, poll_seconds=60)
    assert result.kind == "settled", result
    after = _groups(settle(emu, client, "c1"))
    for name, g in after.items():
        assert (g["CurrentCount"], g["TargetCount"]) == (0, 0)
        assert g.get("LifeCycleConfig") == before[name].get("LifeCycleConfig")  # absent stays absent
    assert "LifeCycleConfig" not in after["controller"]
    record = store.get(REF.key)
    assert record is not None and record.snapshot is not None
    assert {n: s.count for n, s in record.snapshot.sizes.items()} == {"controller": 1, "dev": 2, "train": 3}

    updates = counting.calls["UpdateCluster"]
    second = eng.act(REF, "stop", transition_id="stop-2")
    assert second.kind == "noop"
    assert counting.calls["UpdateCluster"] == updates  # nothing sent
    record2 = store.get(REF.key)
    assert record2 is not None and record2.snapshot == record.snapshot  # sizes not overwritten with zeros

    result = eng.act(REF, "start", transition_id="start-1", wait=True, poll_seconds=60)
    assert result.kind == "settled", result
    restored = _groups(settle(emu, client, "c1"))
    assert {n: g["CurrentCount"] for n, g in restored.items()} == {"controller": 1, "dev": 2, "train": 3}
    for name, g in restored.items():
        assert g.get("LifeCycleConfig") == before[name].get("LifeCycleConfig")
    outcomes = {o.group: o.outcome for o in store.get(REF.key).last_outcomes}  # type: ignore[union-attr]
    assert set(outcomes.values()) == {"restored"}
    assert [h.action for h in store.history(REF.key)][:2] == ["start", "stop"]


def test_start_with_nothing_recorded_sends_nothing(
    emu: Emulator, counting: CountingClient, engine: tuple[Engine, Collector, MemoryStore]
) -> None:
    eng, _events, _ = engine
    counting.client.create_cluster(**three_tier_request())
    settle(emu, counting.client, "c1")
    result = eng.act(REF, "start", transition_id="start-1")
    assert result.kind == "noop" and "nothing recorded" in result.message
    assert counting.calls["UpdateCluster"] == 0


def test_quiet_tick_makes_no_api_calls(
    emu: Emulator, counting: CountingClient, engine: tuple[Engine, Collector, MemoryStore]
) -> None:
    eng, _, _ = engine
    counting.client.create_cluster(**three_tier_request())
    settle(emu, counting.client, "c1")
    sched = resolve("Mon-Fri 08:00-18:00 UTC", {})
    governed = [Governed(REF, "office", sched, False)]
    tick(eng, governed, emu.clock.now())  # 06:00 Monday: first sight, stopped -> stop sent
    settle(emu, counting.client, "c1")
    tick(eng, governed, emu.clock.now())  # follows the stop to settled
    before = sum(counting.calls.values())
    for _ in range(5):
        emu.advance(300)
        tick(eng, governed, emu.clock.now())
    assert sum(counting.calls.values()) == before  # nothing due: not even a DescribeCluster


def test_schedule_week_acts_at_each_transition(
    emu: Emulator, counting: CountingClient, engine: tuple[Engine, Collector, MemoryStore]
) -> None:
    eng, events, _store = engine
    counting.client.create_cluster(**three_tier_request())
    settle(emu, counting.client, "c1")
    sched = resolve("Mon-Fri 08:00-18:00 UTC", {})
    governed = [Governed(REF, "office", sched, False)]
    end = emu.clock.now() + timedelta(days=2)
    while emu.clock.now() < end:
        tick(eng, governed, emu.clock.now())
        emu.advance(600)
    sent = [e.message.split()[0] for e in events.events if e.kind == "sent"]
    # Mon 06:00 first sight stop, Mon 08:00 start, Mon 18:00 stop, Tue 08:00 start, Tue 18:00 stop
    assert sent == ["stop", "start", "stop", "start", "stop"]
    assert counting.calls["UpdateCluster"] == 5
    assert schedule_state(sched, emu.clock.now()).desired == "stopped"


def test_busy_cluster_is_left_alone(
    emu: Emulator, counting: CountingClient, engine: tuple[Engine, Collector, MemoryStore]
) -> None:
    eng, _, _ = engine
    counting.client.create_cluster(**three_tier_request())  # still Creating
    result = eng.act(REF, "stop", transition_id="stop-1")
    assert result.kind == "skip" and "Creating" in result.message
    assert counting.calls["UpdateCluster"] == 0


def test_interrupted_intent_is_resumed_once(
    emu: Emulator, counting: CountingClient, engine: tuple[Engine, Collector, MemoryStore]
) -> None:
    """A crash after the intent was stored but before UpdateCluster: the next tick, finding the stop still
    wanted, plans it again and sends it, once; a bare follow never re-sends what it did not see go out."""
    eng, _, store = engine
    counting.client.create_cluster(**three_tier_request())
    settle(emu, counting.client, "c1")
    dry = eng.act(REF, "stop", transition_id="stop-1", dry_run=True)
    assert dry.kind == "dry-run" and counting.calls["UpdateCluster"] == 0 and store.get(REF.key) is None
    # simulate the crash: snapshot + intent stored, the call never made
    from hyperpod_scheduler.engine import planner
    from hyperpod_scheduler.engine.update_request import build_update

    view = eng.describe(REF)
    plan = planner.plan_stop(view, None, emu.clock.now(), "stop-1")
    assert isinstance(plan, planner.Send)
    request = build_update(view, plan.counts)
    now = emu.clock.now()
    from hyperpod_scheduler.store.records import ClusterRecord

    store.put(
        ClusterRecord.new(REF.key, now).evolve(
            snapshot=plan.snapshot,
            pending=PendingAction(
                transition_id="stop-1",
                action="stop",
                phase="intent",
                request_digest=request_digest(request),
                created_at=now,
                updated_at=now,
                targets={n: c for n, (c, _) in plan.counts.items()},
                transition_at=now,
            ),
        ),
        expected_version=None,
    )
    assert eng.follow(REF, wait=False).kind == "skip"  # it never went out: only a tick decides
    assert counting.calls["UpdateCluster"] == 0
    wanted = planner.ScheduleState(desired="stopped", last_transition_at=now - timedelta(minutes=1))
    assert turn(eng, REF, wanted).kind == "sent"
    assert counting.calls["UpdateCluster"] == 1
    settle(emu, counting.client, "c1")
    eng.follow(REF, wait=False)
    eng.follow(REF, wait=False)
    assert counting.calls["UpdateCluster"] == 1  # never twice for one transition
    rec = store.get(REF.key)
    assert rec is not None and rec.pending is None and rec.applied_state == "stopped"
