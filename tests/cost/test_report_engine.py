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

REF = ref_for("c1", "us-east-1")


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with running_emulator(virtual_start=START, seed=3) as e:
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
    (night,) = c.nights
    assert night.hours == pytest.approx(10, abs=0.5)  # from the settled stop to the start going out
    assert {g.group: (g.instance_type, g.recorded, g.running) for g in night.groups} == {
        "controller": ("ml.m5.xlarge", 1, 0),
        "dev": ("ml.g5.xlarge", 2, 0),
        "train": ("ml.trn1.32xlarge", 3, 0),
    }
    table = bundled().instance_hourly
    hourly = table["ml.m5.xlarge"].usd + 2 * table["ml.g5.xlarge"].usd + 3 * table["ml.trn1.32xlarge"].usd
    assert c.totals.avoided_cost == pytest.approx(hourly * night.hours)
    assert c.unpriced == set() and c.shortfalls == []
