"""State that ends with its transition (issue "one truth per cluster", cases 6-9, 14 and 15).

A floor, a snapshot, a retry, a hold and a wait each belong to the transition they serve; once it is
over they must not decide the next one. Each test runs the engine against the emulator on its
virtual clock and checks what a user would see: the sizes the cluster comes back at, what was sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.config.model import Policy, Retry
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.ref import ClusterRef, ClusterSettings
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.guards.capacity import CapacityGuard
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.conftest import ROLE, START, settle
from tests.sessions import shared_session

NAME = "c1"
FAST = {"provisioning": [300, 360], "ami_setup": [200, 240], "deep_health_check": [1800, 2000]}


@dataclass
class Rig:
    emu: Emulator
    client: Any
    store: MemoryStore
    events: Collector

    def engine(self, *, include_protected: bool = False, **kw: Any) -> Engine:
        return Engine(
            self.store,
            lambda r: self.client,
            self.emu.clock.now,
            events=self.events,
            sleep=self.emu.advance,
            guards_for=lambda r: [CapacityGuard(r.settings.policy, include_protected)],
            **kw,
        )

    def targets(self) -> dict[str, int]:
        d = self.client.describe_cluster(ClusterName=NAME)
        return {g["InstanceGroupName"]: g["TargetCount"] for g in d["InstanceGroups"]}

    def resize(self, **counts: int) -> None:
        """Someone changes group sizes by hand (the console: every group re-sent as it is)."""
        d = self.client.describe_cluster(ClusterName=NAME)
        keep = ("InstanceGroupName", "InstanceType", "ExecutionRole", "SlurmConfig", "LifeCycleConfig")
        groups = [
            {**{k: g[k] for k in keep if k in g}, "InstanceCount": counts.get(g["InstanceGroupName"], g["TargetCount"])}
            for g in d["InstanceGroups"]
        ]
        self.client.update_cluster(ClusterName=NAME, InstanceGroups=groups)
        settle(self.emu, self.client, NAME)

    def sent(self) -> list[str]:
        return [e.message for e in self.events.events if e.kind == "sent"]


def _rig(emu: Emulator, compute: dict[str, tuple[str, int]]) -> Rig:
    session = shared_session()
    client = session.client("sagemaker", endpoint_url=emu.endpoint)
    client.create_cluster(**slurm_request(NAME, compute, role=ROLE))
    settle(emu, client, NAME)
    return Rig(emu, client, MemoryStore(), Collector())


@pytest.fixture
def rig() -> Iterator[Rig]:
    with running_emulator(virtual_start=START, seed=5, capacity={"timing": FAST}, in_process=True) as emu:
        yield _rig(emu, {"gpu": ("ml.g5.12xlarge", 4), "cpu": ("ml.c5.xlarge", 2)})


def governed(settings: ClusterSettings = ClusterSettings()) -> ClusterRef:
    return ref_for(NAME, "us-east-1", account=DEFAULT_ACCOUNT).governed(settings)


def floor(n: int) -> ClusterSettings:
    return ClusterSettings(policy=Policy(groups={"gpu": {"floor": n}}))


def test_a_second_stop_of_a_group_kept_at_its_floor_keeps_its_size_from_before_the_floor(rig: Rig) -> None:
    ref = governed(floor(2))
    engine = rig.engine()
    assert engine.act(ref, "stop", transition_id="evening", wait=True, poll_seconds=60).kind == "settled"
    assert rig.targets()["gpu"] == 2
    # Later that night the operator releases everything for one run: gpu goes from its floor to 0.
    stop_all = rig.engine(include_protected=True)
    assert stop_all.act(ref, "stop", transition_id="late", wait=True, poll_seconds=60).kind == "settled"
    assert rig.targets()["gpu"] == 0
    assert engine.act(ref, "start", transition_id="morning", wait=True, poll_seconds=60).kind == "settled"
    assert rig.targets() == {"controller": 1, "gpu": 4, "cpu": 2}


def test_an_enforced_restop_after_a_hand_start_keeps_the_size_from_before_the_floor(rig: Rig) -> None:
    ref = governed(floor(2))
    engine = rig.engine()
    office = resolve("Mon-Fri 08:00-18:00 UTC", {})
    fleet = [Governed(ref, "office", office, True)]
    tick(engine, fleet, rig.emu.clock.now())  # 06:00 Monday: stopped, gpu kept at its floor of 2
    settle(rig.emu, rig.client, NAME)
    tick(engine, fleet, rig.emu.clock.now())
    assert rig.targets()["gpu"] == 2
    rig.resize(cpu=2)  # someone starts cpu by hand; the enforced schedule stops it again
    tick(engine, fleet, rig.emu.clock.now())
    settle(rig.emu, rig.client, NAME)
    tick(engine, fleet, rig.emu.clock.now())
    assert rig.targets() == {"controller": 1, "gpu": 2, "cpu": 0}
    record = rig.store.get(ref.key)
    assert record is not None and record.snapshot is not None and record.snapshot.sizes["gpu"].count == 4


def test_a_stop_that_sends_nothing_still_records_todays_sizes(rig: Rig) -> None:
    engine = rig.engine()
    everything = governed()
    assert engine.act(everything, "stop", transition_id="mon", wait=True, poll_seconds=60).kind == "settled"
    assert engine.act(everything, "start", transition_id="tue", wait=True, poll_seconds=60).kind == "settled"
    rig.resize(cpu=0)  # Tuesday: cpu is not needed any more, zeroed by hand
    # Tuesday evening every group with nodes is protected: nothing is sent.
    kept = governed(ClusterSettings(policy=Policy(groups={"gpu": "keep", "controller": "keep"})))
    assert engine.act(kept, "stop", transition_id="tue-evening").kind == "noop"
    assert engine.act(kept, "start", transition_id="wed", wait=True, poll_seconds=60).kind in ("noop", "settled")
    # Wednesday morning restores Tuesday's sizes: cpu stays at the zero it was given by hand.
    assert rig.targets()["cpu"] == 0


def _ticks(engine: Engine, fleet: Sequence[Governed], emu: Emulator, until: timedelta, step_s: float) -> None:
    end = START + until
    while emu.clock.now() < end:
        tick(engine, fleet, emu.clock.now())
        emu.advance(step_s)


def test_yesterdays_retry_never_takes_the_place_of_todays_start() -> None:
    # 4 G5s until Monday 07:00; then 2 (Monday's start rolls back, its retries run past the window's
    # end at 09:00); back to 8 on Tuesday at 08:10.
    pool = [{"at": "2026-11-30T07:00:00Z", "available": 2}, {"at": "2026-12-01T08:10:00Z", "available": 8}]
    capacity = {"timing": FAST, "instance_types": {"ml.g5.48xlarge": {"available": 4, "schedule": pool}}}
    with running_emulator(virtual_start=START, seed=13, capacity=capacity, in_process=True) as emu:
        rig = _rig(emu, {"gpu": ("ml.g5.48xlarge", 4)})
        engine = rig.engine(retry=Retry(deadline_minutes=120, backoff_minutes=[5]))
        ref = governed()
        fleet = [Governed(ref, "office", resolve("Mon-Fri 08:00-09:00 UTC", {}), False)]
        # Monday: stopped at the first tick (before 08:00); the 08:00 start rolls back and is retried
        # until the window ends at 09:00, while its retry deadline (10:00) is still ahead.
        _ticks(engine, fleet, emu, timedelta(hours=3, minutes=30), 60)
        assert rig.targets()["gpu"] == 0
        emu.advance((START + timedelta(days=1, hours=1, minutes=50) - emu.clock.now()).total_seconds())
        _ticks(engine, fleet, emu, timedelta(days=1, hours=2, minutes=55), 60)  # Tuesday 07:50 - 08:55
        tuesday = [e for e in rig.events.events if e.at >= START + timedelta(days=1)]
        assert not [e for e in tuesday if "retries exhausted" in e.message]
        assert rig.targets()["gpu"] == 4


def test_a_lapsed_hold_no_longer_reverses_manual_commands(rig: Rig) -> None:
    engine = rig.engine()
    ref = governed()
    office = resolve("Mon-Fri 08:00-18:00 UTC", {})
    fleet = [Governed(ref, "office", office, False)]
    rig.emu.advance(3 * 3600)  # Monday 09:00: the schedule wants it running, and it runs
    tick(engine, fleet, rig.emu.clock.now())
    engine.set_hold(ref, "running", rig.emu.clock.now() + timedelta(hours=1), "demo")
    rig.emu.advance(2 * 3600)  # the hold lapsed at 10:00
    tick(engine, fleet, rig.emu.clock.now())
    assert engine.act(ref, "stop", transition_id="manual-stop", wait=True, poll_seconds=60).kind == "settled"
    before = len(rig.sent())
    for _ in range(3):
        rig.emu.advance(600)
        tick(engine, fleet, rig.emu.clock.now())
    assert rig.targets()["gpu"] == 0, "the manual stop was reversed by a hold that had lapsed"
    assert len(rig.sent()) == before
    record = rig.store.get(ref.key)
    assert record is not None and record.hold is None


def test_a_hold_stop_refused_by_health_checks_fails_once_at_the_settle_timeout() -> None:
    with running_emulator(virtual_start=START, seed=9, capacity={"timing": FAST}, in_process=True) as emu:
        request = slurm_request(NAME, {"gpu": ("ml.g5.12xlarge", 2)}, continuous=True)
        request["InstanceGroups"][1]["OnStartDeepHealthChecks"] = ["InstanceStress", "InstanceConnectivity"]
        session = shared_session()
        client = session.client("sagemaker", endpoint_url=emu.endpoint)
        client.create_cluster(**request)
        settle(emu, client, NAME)
        rig = Rig(emu, client, MemoryStore(), Collector())
        engine = rig.engine(settle_timeout=timedelta(minutes=10))
        ref = governed()
        fleet = [Governed(ref, "always", resolve("always", {}), False)]
        client.batch_add_cluster_nodes(
            ClusterName=NAME, NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}]
        )
        emu.advance(700)  # the new node's deep health checks run for half an hour
        engine.set_hold(ref, "stopped", None, "maintenance")
        for _ in range(15):
            tick(engine, fleet, emu.clock.now())
            emu.advance(60)
        lines = [h.outcome for h in sorted(rig.store.history(ref.key), key=lambda h: h.at) if h.action == "stop"]
        assert lines == ["waiting", "failed"]
        assert len([e for e in rig.events.events if e.kind == "failed"]) == 1


def test_a_clock_stepped_back_after_the_evening_stop_sends_nothing(rig: Rig) -> None:
    engine = rig.engine()
    ref = governed()
    fleet = [Governed(ref, "office", resolve("Mon-Fri 08:00-18:00 UTC", {}), True)]
    rig.emu.advance(13 * 3600)  # Monday 19:00: stopped by the enforced schedule
    tick(engine, fleet, rig.emu.clock.now())
    settle(rig.emu, rig.client, NAME)
    tick(engine, fleet, rig.emu.clock.now())
    assert rig.targets()["gpu"] == 0
    sent = len(rig.sent())
    # The host's clock is stepped back an hour (NTP, a restored VM): the schedule reads 18:0x again.
    back = rig.emu.clock.now() - timedelta(hours=1, minutes=30)
    engine.now = lambda: back
    for _ in (1, 2):
        tick(engine, fleet, back)
    assert len(rig.sent()) == sent
    assert rig.targets()["gpu"] == 0


def test_a_manual_start_under_an_active_hold_stopped_is_refused_naming_the_hold(rig: Rig) -> None:
    engine = rig.engine()
    ref = governed()
    assert engine.act(ref, "stop", transition_id="evening", wait=True, poll_seconds=60).kind == "settled"
    engine.set_hold(ref, "stopped", None, "disk maintenance")
    sent = len(rig.sent())
    result = engine.act(ref, "start", transition_id="manual-start")
    assert result.kind == "refused"
    assert "held stopped until released" in result.message and "disk maintenance" in result.message
    assert "release" in result.message
    assert len(rig.sent()) == sent and rig.targets()["gpu"] == 0


def test_a_manual_start_behind_a_settling_stop_says_it_was_not_sent(rig: Rig) -> None:
    engine = rig.engine()
    ref = governed()
    assert engine.act(ref, "stop", transition_id="evening").kind == "sent"  # still settling
    result = engine.act(ref, "start", transition_id="manual-start")
    assert result.kind == "skip" and "was not sent" in result.message
    assert not [m for m in rig.sent() if m.startswith("start")]


def test_a_partial_continuous_start_does_not_hold_up_the_evening_stop() -> None:
    # Only 4 of the 6 G5s this Continuous cluster asks for come back in the morning; the one-hour window
    # ends at 09:00 while the start is still waiting for the other two.
    pool = [{"at": "2026-11-30T07:00:00Z", "available": 4}]
    capacity = {"timing": FAST, "instance_types": {"ml.g5.48xlarge": {"available": 6, "schedule": pool}}}
    with running_emulator(virtual_start=START, seed=21, capacity=capacity, in_process=True) as emu:
        session = shared_session()
        client = session.client("sagemaker", endpoint_url=emu.endpoint)
        client.create_cluster(**slurm_request(NAME, {"gpu": ("ml.g5.48xlarge", 6)}, role=ROLE, continuous=True))
        settle(emu, client, NAME)
        rig = Rig(emu, client, MemoryStore(), Collector())
        engine = rig.engine()
        ref = governed()
        fleet = [Governed(ref, "office", resolve("Mon-Fri 08:00-09:00 UTC", {}), False)]
        tick(engine, fleet, emu.clock.now())  # before 08:00: stopped
        settle(emu, client, NAME)
        tick(engine, fleet, emu.clock.now())
        _ticks(engine, fleet, emu, timedelta(hours=3, minutes=10), 60)  # to 09:10
        stops = [m for m in rig.sent() if m.startswith("stop")]
        assert len(stops) == 2, rig.sent()  # the first tick's and the 09:00 one, not at the settle timeout
        record = rig.store.get(ref.key)
        assert record is not None
        starts = [h for h in rig.store.history(ref.key) if h.action == "start"]
        assert starts and "overtaken" in str(starts[0].detail.get("message"))


def test_a_released_hold_whose_start_ran_out_of_capacity_is_started_by_the_schedule() -> None:
    # Monday 06:00 stopped by its schedule (office hours 08:00-18:00); 06:30 someone holds it running,
    # but only 2 of its 4 G5s exist until 08:30, so the hold's start rolls back and its retries (30 min)
    # run out. The hold is released at 09:00 while the schedule wants it running and the G5s are back:
    # the next tick starts it. It stayed at zero all day, its record saying "running" (found by the
    # state machine's long run).
    pool = [{"at": "2026-11-30T06:20:00Z", "available": 2}, {"at": "2026-11-30T08:30:00Z", "available": 8}]
    capacity = {"timing": FAST, "instance_types": {"ml.g5.48xlarge": {"available": 4, "schedule": pool}}}
    with running_emulator(virtual_start=START, seed=13, capacity=capacity, in_process=True) as emu:
        rig = _rig(emu, {"gpu": ("ml.g5.48xlarge", 4)})
        engine = rig.engine(retry=Retry(deadline_minutes=30, backoff_minutes=[5]))
        ref = governed()
        fleet = [Governed(ref, "office", resolve("Mon-Fri 08:00-18:00 UTC", {}), False)]
        _ticks(engine, fleet, emu, timedelta(minutes=25), 60)  # stopped by the schedule
        assert rig.targets()["gpu"] == 0
        engine.set_hold(ref, "running", None, "a demo")
        _ticks(engine, fleet, emu, timedelta(hours=3), 60)  # the hold's start fails, retries run out
        assert rig.targets()["gpu"] == 0
        assert [e for e in rig.events.events if "retries exhausted" in e.message]
        assert engine.release(ref)
        _ticks(engine, fleet, emu, timedelta(hours=4), 60)
        assert rig.targets()["gpu"] == 4
