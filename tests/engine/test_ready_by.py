"""Ready-by starts: the lead time learned from history, and a cluster that is ready when the day begins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hyperpod_scheduler.config.model import ReadyBy
from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, lead_for, plan, ref_for, schedule_state, tick
from hyperpod_scheduler.engine.readiness import lead_time, percentile
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
    with running_emulator(virtual_start=START, seed=21) as emu:
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
