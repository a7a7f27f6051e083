"""The training-plan watch on the emulator: expiry warnings 7, 3 and 1 days before the end (once each,
across restarts), a Scheduled plan's group started when its block becomes Active, and paid reserved
hours that ran idle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hyperpod_scheduler.app.report import build, none_found
from hyperpod_scheduler.cli.report import detail_lines
from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.cost.prices import bundled
from hyperpod_scheduler.cost.summary import as_document
from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.engine import plans
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.schedule import load_schedules
from hyperpod_scheduler.store.memory import MemoryStore
from hyperpod_scheduler.store.records import PlanWatch
from tests.engine.conftest import START, settle
from tests.sessions import shared_session

P5 = "ml.p5.48xlarge"
ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/{}"


def _client(endpoint: str) -> Any:
    session = shared_session()
    return session.client("sagemaker", endpoint_url=endpoint)


def _plan_cluster(plan: str, count: int) -> dict[str, Any]:
    request = slurm_request("reserved", {"gpu": (P5, count)}, continuous=True)
    request["InstanceGroups"][1]["TrainingPlanArn"] = ARN.format(plan)
    return request


class Rig:
    def __init__(self, emu: Any, store: MemoryStore | None = None) -> None:
        self.emu = emu
        self.client = _client(emu.endpoint)
        self.store = store or MemoryStore()
        self.events = Collector()
        self.engine = Engine(self.store, lambda r: self.client, emu.clock.now, events=self.events, sleep=emu.advance)
        always = load_schedules({"always": "always"})["always"]
        self.governed = [Governed(ref_for("reserved", "us-east-1"), "always", always, False)]

    def run(self, hours: float, step_s: float = 3600) -> None:
        end = self.emu.clock.now() + timedelta(hours=hours)
        while self.emu.clock.now() < end:
            tick(self.engine, self.governed, self.emu.clock.now())
            self.emu.advance(step_s)

    def watch(self) -> PlanWatch:
        key = self.engine.identify(self.governed[0].ref)[0].key
        record = self.store.get(key)
        assert record is not None
        return next(iter(record.plans.values()))

    def lines(self, outcome: str) -> list[Any]:
        key = self.engine.identify(self.governed[0].ref)[0].key
        return sorted(
            (h for h in self.store.history(key) if h.action == "plan" and h.outcome == outcome), key=lambda h: h.at
        )


def test_a_scheduled_plans_group_is_started_when_its_block_becomes_active() -> None:
    capacity = {"training_plans": {"later": {"instance_type": P5, "count": 2, "start": "+30h", "duration_hours": 96}}}
    with running_emulator(virtual_start=START, seed=31, capacity=capacity, in_process=True) as emu:
        rig = Rig(emu)
        rig.client.create_cluster(**_plan_cluster("later", 0))
        settle(emu, rig.client, "reserved")
        rig.run(24)
        watch = rig.watch()
        assert watch.status == "Scheduled" and watch.groups == ["gpu"] and not rig.lines("active")
        # The next look is due exactly when the block starts, not on the hour after.
        assert watch.next_look is not None and watch.next_look <= START + timedelta(hours=30)
        rig.run(8, step_s=600)
        active = rig.lines("active")
        assert len(active) == 1 and active[0].detail["count"] == 2
        assert active[0].at - (START + timedelta(hours=30)) <= timedelta(minutes=10)
        rig.run(1, step_s=300)
        gpu = next(
            g
            for g in rig.client.describe_cluster(ClusterName="reserved")["InstanceGroups"]
            if g["InstanceGroupName"] == "gpu"
        )
        assert gpu["TargetCount"] == 2 and gpu["CurrentCount"] == 2
        rig.run(4)
        assert len(rig.lines("active")) == 1  # once, not every look
        # Once it runs, the reserved capacity is in use: nothing idle after the nodes came up.
        assert rig.watch().in_use == 2 and rig.watch().available == 0


def test_an_activation_interrupted_before_its_start_is_started_at_the_next_tick() -> None:
    capacity = {"training_plans": {"later": {"instance_type": P5, "count": 2, "start": "+30h", "duration_hours": 96}}}
    with running_emulator(virtual_start=START, seed=35, capacity=capacity, in_process=True) as emu:
        rig = Rig(emu)
        rig.client.create_cluster(**_plan_cluster("later", 0))
        settle(emu, rig.client, "reserved")
        rig.run(24)
        real = rig.engine.raise_groups
        calls: list[str] = []

        def dies_once(*args: Any, **kwargs: Any) -> Any:
            calls.append(kwargs["transition_id"])
            if len(calls) == 1:
                raise RuntimeError("the process died here")
            return real(*args, **kwargs)

        rig.engine.raise_groups = dies_once  # type: ignore[method-assign]
        rig.run(8, step_s=600)
        assert len(rig.lines("active")) == 1 and len(set(calls)) == 1 and len(calls) == 2
        rig.run(1, step_s=300)
        assert rig.watch().start_wanted is None
        gpu = next(
            g
            for g in rig.client.describe_cluster(ClusterName="reserved")["InstanceGroups"]
            if g["InstanceGroupName"] == "gpu"
        )
        assert gpu["TargetCount"] == 2


def test_expiry_is_warned_7_3_and_1_days_before_once_each_even_across_a_restart() -> None:
    capacity = {"training_plans": {"ending": {"instance_type": P5, "count": 2, "start": "+0s", "duration_hours": 200}}}
    with running_emulator(virtual_start=START, seed=32, capacity=capacity, in_process=True) as emu:
        rig = Rig(emu)
        rig.client.create_cluster(**_plan_cluster("ending", 2))
        settle(emu, rig.client, "reserved")
        end = START + timedelta(hours=200)
        rig.run(24 * 4)
        assert [h.detail["days"] for h in rig.lines("warned")] == [7]
        # A new process (a restart, a Lambda invocation) on the same store: nothing said twice.
        rig2 = Rig(emu, rig.store)
        rig2.run(24 * 5)
        warned = rig2.lines("warned")
        assert [h.detail["days"] for h in warned] == [7, 3, 1]
        for h, days in zip(warned, (7, 3, 1), strict=True):
            assert timedelta(0) <= h.at - (end - timedelta(days=days)) <= timedelta(hours=1)
        notified = [e for e in rig.events.events + rig2.events.events if e.kind == "plan"]
        assert len([e for e in notified if "ends" in e.message]) == 3
        assert "lose their 2 reserved instance(s)" in notified[0].message
        rig2.run(12)
        assert len(rig2.lines("expired")) == 1 and rig2.watch().status == "Expired"


def test_paid_reserved_hours_that_run_idle_are_counted() -> None:
    capacity = {"training_plans": {"idle": {"instance_type": P5, "count": 2, "start": "+0s", "duration_hours": 100}}}
    with running_emulator(virtual_start=START, seed=33, capacity=capacity, in_process=True) as emu:
        rig = Rig(emu)
        rig.client.create_cluster(**_plan_cluster("idle", 0))  # the team never scaled it up
        settle(emu, rig.client, "reserved")
        rig.run(11)
        watch = rig.watch()
        assert watch.status == "Active" and watch.available == 2 and not rig.lines("active")
        # Eleven hourly looks: ten hours between the first and the last, two reserved instances idle.
        assert plans.idle_hours(watch, START, START + timedelta(days=2)) == pytest.approx(20.0, abs=0.01)
        assert plans.idle_hours(watch, START + timedelta(days=3), START + timedelta(days=4)) == 0


def test_warnings_collapse_when_a_plan_is_first_seen_close_to_its_end() -> None:
    end = START + timedelta(days=2)
    assert plans.warnings_due(end, [], START) == (3, [7, 3])
    assert plans.warnings_due(end, [7, 3], START) == (None, [7, 3])
    assert plans.warnings_due(end, [7, 3], end - timedelta(hours=23)) == (1, [7, 3, 1])
    assert plans.warnings_due(end, [], end) == (None, [])


def test_idle_time_is_split_by_utc_day() -> None:
    since = datetime(2026, 12, 1, 22, 0, tzinfo=UTC)
    got = plans.idle_by_day(since, since + timedelta(hours=4), 3)
    assert got == {"2026-12-01": 3 * 7200.0, "2026-12-02": 3 * 7200.0}


def test_the_report_shows_idle_reserved_hours_beside_the_saving() -> None:
    capacity = {
        "training_plans": {
            "idle": {"instance_type": P5, "count": 2, "start": "+0s", "duration_hours": 100, "upfront_fee": "10000"}
        }
    }
    with running_emulator(virtual_start=START, seed=34, capacity=capacity, in_process=True) as emu:
        rig = Rig(emu)
        rig.client.create_cluster(**_plan_cluster("idle", 0))
        settle(emu, rig.client, "reserved")
        rig.run(11)
        report = build(rig.store, bundled(), none_found, START, emu.clock.now() + timedelta(hours=1))
        [idle] = report.reserved_idle
        assert idle.plan == "idle" and idle.idle_instance_hours == pytest.approx(20.0, abs=0.01)
        doc = as_document(report)
        lines = detail_lines(doc)
        line = next(x for x in lines if "training plan idle" in x)
        assert "20.0 reserved instance-hours paid and idle" in line
        # 10,000 for 2 instances x 100 hours: 50 an instance-hour, 20 idle instance-hours.
        assert idle.cost == pytest.approx(1000.0, rel=0.001)
        assert "(1,000.00 USD of the plan's upfront fee)" in line
