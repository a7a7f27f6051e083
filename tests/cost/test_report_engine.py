"""The savings maths read what the engine really writes: a stop and a start on the emulator."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from hyperpod_scheduler.cost.prices import bundled
from hyperpod_scheduler.cost.savings import build_report
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.conftest import START, CountingClient, settle, three_tier_request
from tests.guards.test_capacity import _p5_request

REF = ref_for("c1", "us-east-1")
P5 = ref_for("p5c", "us-east-1")


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with running_emulator(virtual_start=START, seed=3, in_process=True) as e:
        yield e


def test_a_real_stop_and_start_make_one_priced_night(emu: Emulator) -> None:
    client = CountingClient(emu.endpoint).client
    store = MemoryStore()
    eng = Engine(store, lambda ref: client, emu.clock.now, sleep=emu.advance)
    client.create_cluster(**three_tier_request())
    settle(emu, client, "c1")
    t0 = emu.clock.now()
    assert eng.act(REF, "stop", transition_id="stop-1", wait=True, poll_seconds=60).kind == "settled"
    emu.advance(10 * 3600)
    assert eng.act(REF, "start", transition_id="start-1", wait=True, poll_seconds=60).kind == "settled"
    t1 = emu.clock.now()

    r = build_report(store.history_all(), {REF.key: store.get(REF.key)}, {}, bundled(), t0, t1 + timedelta(seconds=1))
    (c,) = r.clusters
    (cost,) = c.nights
    night = cost.night
    assert night.hours == pytest.approx(10, abs=0.5)  # from the settled stop to the start going out
    assert {g.group: (g.instance_type, g.recorded, g.running) for g in night.groups} == {
        "controller": ("ml.m5.xlarge", 1, 0),
        "dev": ("ml.g5.xlarge", 2, 0),
        "train": ("ml.trn1.32xlarge", 3, 0),
    }
    table = bundled().instance_hourly
    hourly = table["ml.m5.xlarge"].usd + 2 * table["ml.g5.xlarge"].usd + 3 * table["ml.trn1.32xlarge"].usd
    assert c.periods.window.saving == pytest.approx(hourly * night.hours)
    assert c.unpriced == set() and c.shortfalls == []
    # The engine writes typed outcomes; nothing parses text to read them.
    settled = [e for e in store.history_all() if e.action in ("stop", "start") and e.outcome == "ok"]
    assert [e.detail["outcomes"]["train"] for e in settled] == [
        {"outcome": "stopped", "current": 0, "target": 0},
        {"outcome": "restored", "current": 3, "target": 3},
    ]


def test_a_cluster_kept_whole_by_its_guards_is_a_night_of_kept_cost(emu: Emulator) -> None:
    client = CountingClient(emu.endpoint).client
    store = MemoryStore()
    eng = Engine(store, lambda ref: client, emu.clock.now, sleep=emu.advance)  # the default capacity policy
    request = _p5_request()
    request["InstanceGroups"] = [g for g in request["InstanceGroups"] if g["InstanceGroupName"] != "cpu"]
    client.create_cluster(**request)
    settle(emu, client, "p5c")
    t0 = emu.clock.now()
    # Scarce P5 workers stay, and the Slurm controller with them: nothing to send, nothing saved.
    assert eng.act(P5, "stop", transition_id="stop-1").kind == "noop"
    emu.advance(10 * 3600)
    assert eng.act(P5, "start", transition_id="start-1").kind == "noop"
    r = build_report(store.history_all(), {P5.key: store.get(P5.key)}, {}, bundled(), t0, emu.clock.now())
    (c,) = r.clusters
    table = bundled().instance_hourly
    hourly = table["ml.m5.xlarge"].usd + 2 * table["ml.p5.48xlarge"].usd
    assert c.night_count == 1 and not c.released_anything
    assert c.periods.window.saving == 0
    assert c.periods.window.kept_cost == pytest.approx(hourly * 10, rel=0.01)
