"""Ready-by starts: the lead time learned from history, and a cluster that is ready when the day begins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.config.model import ReadyBy
from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, lead_for, ref_for, schedule_state, tick
from hyperpod_scheduler.engine.plan_steps import plan
from hyperpod_scheduler.engine.readiness import GroupHistory, cluster_lead, group_lead, lead_time, percentile
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.schedule import load_schedules
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.conftest import START, CountingClient, settle, three_tier_request

SETTINGS = ReadyBy(percentile=90, margin_minutes=10, default_minutes=45, max_minutes=120)


@pytest.mark.parametrize(
    ("durations_min", "lead_min", "why"),
    [
        ([], 45, "default"),
        ([20, 22], 45, "default"),
        ([20, 22, 25, 30, 21, 19, 24, 26, 23, 28], 38, "p90 of 10 starts 28 min + 10 min margin"),
        ([100, 130, 150], 120, "capped at 120"),
    ],
)
def test_lead_time(durations_min: list[float], lead_min: float, why: str) -> None:
    lead = lead_time([m * 60 for m in durations_min], SETTINGS)
    assert lead.lead == timedelta(minutes=lead_min)
    assert why in lead.why


def test_percentile_is_a_duration_that_happened() -> None:
    assert percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90) == 9
    assert percentile([5], 90) == 5


def _schedules() -> dict:  # type: ignore[type-arg]
    return load_schedules({"office": {"windows": ["Mon-Fri 08:00-18:00 UTC"], "ready_by": True}})


def test_a_start_within_the_lead_is_wanted_already_and_counted_as_that_transition() -> None:
    sched = _schedules()["office"]
    at_0720 = datetime(2026, 11, 30, 7, 20, tzinfo=UTC)
    early = schedule_state(sched, at_0720, timedelta(minutes=45))
    assert early.desired == "running" and early.last_transition_at == datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    assert schedule_state(sched, at_0720, timedelta(minutes=30)).desired == "stopped"
    assert schedule_state(sched, at_0720).desired == "stopped"  # no lead: the plain schedule


def test_ready_by_cluster_is_ready_at_eight_and_plan_says_when_and_why() -> None:
    with running_emulator(virtual_start=START, seed=21, in_process=True) as emu:
        client = CountingClient(emu.endpoint)
        client.client.create_cluster(**three_tier_request())
        settle(emu, client.client, "c1")
        store = MemoryStore()
        events = Collector()
        engine = Engine(store, lambda r: client.client, emu.clock.now, events=events)
        ref = ref_for("c1", "us-east-1", account=DEFAULT_ACCOUNT)
        governed = [Governed(ref, "office", _schedules()["office"], False)]
        ready_at: dict[str, datetime] = {}
        while emu.clock.now() < START + timedelta(days=5):
            tick(engine, governed, emu.clock.now(), ready_by=SETTINGS)
            for e in events.events:
                if e.kind == "settled" and e.message.startswith("start"):
                    ready_at.setdefault(e.at.date().isoformat(), e.at)
            emu.advance(300)
        eight = {d: datetime.fromisoformat(f"{d}T08:00:00+00:00") for d in ready_at}
        late = [d for d, t in ready_at.items() if t > eight[d]]
        assert len(ready_at) == 5 and not late, ready_at
        record = store.get(ref.key)
        assert record is not None and len(record.start_durations_s) == 5
        lead = lead_for(engine, governed[0], SETTINGS)
        assert "p90 of 5 starts" in lead.why
        steps = plan(governed, START + timedelta(days=7), START + timedelta(days=8), {ref.key: lead})
        start_step = next(s for s in steps if s.action == "start")
        assert start_step.at == datetime(2026, 12, 7, 8, 0, tzinfo=UTC) - lead.lead
        assert "ready by Mon 08:00Z" in start_step.why


def _group(name: str, itype: str, checks: bool, minutes: list[float]) -> GroupHistory:
    return GroupHistory(name, itype, checks, [{"launched": 300.0, "health_checks": m * 60 - 300} for m in minutes])


@pytest.mark.parametrize(
    ("group", "lead_min", "why"),
    [
        (_group("w", "ml.p5.48xlarge", True, []), 105, "45 min + 60 min of deep health checks for ml.p5.48xlarge"),
        (_group("w", "ml.p6-b200.48xlarge", True, [50]), 120, "+ 75 min of deep health checks"),
        (_group("w", "ml.g5.12xlarge", True, []), 70, "+ 25 min of deep health checks"),
        (_group("w", "ml.c5.xlarge", True, []), 60, "+ 15 min"),
        (_group("w", "ml.p5.48xlarge", False, []), 45, "default 45 min"),
        (_group("w", "ml.p5.48xlarge", True, [60, 62, 70]), 80, "p90 of 3 starts 70 min"),
    ],
)
def test_a_groups_lead_is_its_own_history_or_a_family_default_with_health_checks(
    group: GroupHistory, lead_min: float, why: str
) -> None:
    lead = group_lead(group, [], SETTINGS)
    assert lead.lead == timedelta(minutes=lead_min)
    assert why in lead.why


def test_the_cluster_lead_is_its_slowest_groups_and_names_it() -> None:
    groups = [_group("cpu", "ml.c5.xlarge", False, [10, 11, 12]), _group("p5", "ml.p5.48xlarge", True, [70, 75, 80])]
    lead = cluster_lead(groups, [15, 16, 17], SETTINGS)
    assert lead.lead == timedelta(minutes=90) and lead.why.startswith("p5: p90 of 3 starts 80 min")
    # A group without its own history yet uses the cluster's (records from before per-group phases).
    older = cluster_lead([_group("p5", "ml.p5.48xlarge", True, [])], [2400, 2460, 2520], SETTINGS)
    assert older.lead == timedelta(minutes=52) and "(whole cluster)" in older.why


def test_a_ready_by_cluster_with_deep_health_checks_is_ready_at_eight_from_its_first_morning() -> None:
    timing = {"provisioning": [300, 420], "ami_setup": [200, 260], "deep_health_check": [2100, 2400]}
    with running_emulator(virtual_start=START, seed=22, capacity={"timing": timing}, in_process=True) as emu:
        client = CountingClient(emu.endpoint)
        request = slurm_request("hc", {"gpu": ("ml.g5.12xlarge", 2)}, continuous=True)
        request["InstanceGroups"][1]["OnStartDeepHealthChecks"] = ["InstanceStress"]
        client.client.create_cluster(**request)
        settle(emu, client.client, "hc")
        store, events = MemoryStore(), Collector()
        engine = Engine(store, lambda r: client.client, emu.clock.now, events=events)
        governed = [
            Governed(ref_for("hc", "us-east-1", account=DEFAULT_ACCOUNT), "office", _schedules()["office"], False)
        ]
        whys: dict[str, str] = {}
        ready_at: dict[str, datetime] = {}
        while emu.clock.now() < START + timedelta(days=5):
            now = emu.clock.now()
            if now.hour == 6 and now.minute < 5:
                whys[now.date().isoformat()] = lead_for(engine, governed[0], SETTINGS).why
            tick(engine, governed, now, ready_by=SETTINGS)
            for e in events.events:
                if e.kind == "settled" and e.message.startswith("start"):
                    ready_at.setdefault(e.at.date().isoformat(), e.at)
            emu.advance(300)
        late = [d for d, t in ready_at.items() if t > datetime.fromisoformat(f"{d}T08:00:00+00:00")]
        assert len(ready_at) == 5 and not late, ready_at
        # 40 to 50 minutes a morning: the old 45-minute default would have been late; the family's is not.
        days = sorted(whys)
        assert "deep health checks for ml.g5.12xlarge" in whys[days[0]]
        assert "p90 of 3 starts" in whys["2026-12-03"] and whys["2026-12-03"].startswith("gpu: "), whys
        record = store.get(governed[0].ref.key)
        assert record is not None and len(record.group_phase_s["gpu"]) == 5
        assert all(40 * 60 <= sum(d.values()) <= 52 * 60 for d in record.group_phase_s["gpu"])
        assert all(30 * 60 <= d["health_checks"] <= 40 * 60 for d in record.group_phase_s["gpu"])
