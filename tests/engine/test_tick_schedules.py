"""One tick over clusters of several schedules: each cluster is judged by its own schedule, whichever
others the pass has evaluated already (the pass evaluates each schedule once)."""

from __future__ import annotations

from typing import Any

from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.conftest import CountingClient, settle, three_tier_request


def test_each_cluster_follows_its_own_schedule_in_one_pass(
    emu: Emulator, counting: CountingClient, engine: tuple[Any, Collector, MemoryStore]
) -> None:
    eng, _, _ = engine
    names = ["night-a", "day-a", "night-b", "day-b"]
    for name in names:
        counting.client.create_cluster(**three_tier_request(name))
    for name in names:
        settle(emu, counting.client, name)
    night = resolve("Mon-Fri 08:00-18:00 UTC", {})  # Monday 06:00: wants it stopped
    day = resolve("Mon-Fri 05:00-18:00 UTC", {})  # wants it running
    schedules = {"night-a": night, "day-a": day, "night-b": night, "day-b": day}
    fleet = [Governed(ref_for(n, "us-east-1"), "t", schedules[n], False) for n in names]
    results = {r.cluster: r.kind for r in tick(eng, fleet, emu.clock.now())}
    assert results == {"night-a": "sent", "day-a": "noop", "night-b": "sent", "day-b": "noop"}
    for name in names:
        settle(emu, counting.client, name)
    sizes = {
        n: sum(g["TargetCount"] for g in counting.client.describe_cluster(ClusterName=n)["InstanceGroups"])
        for n in names
    }
    assert sizes["night-a"] == sizes["night-b"] == 0
    assert sizes["day-a"] > 0 and sizes["day-b"] > 0
