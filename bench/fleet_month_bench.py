"""A simulated month for a fleet on the emulator's virtual clock: instance-hours saved against the
theoretical maximum for its schedules, and what the schedules wanted running but could not have.

    .venv/bin/python bench/fleet_month_bench.py [--quick] [--clusters 20] [--days 31] [--no-shortfall]

The engine ticks every 5 virtual minutes through boto3 over HTTP, as cron would run it; capacity held
(launching, running or shutting down) is sampled every virtual minute. "Saved / max" compares the
instance-hours not used with the instance-hours the schedules leave stopped (100% would mean every
instance gone the very minute its schedule turns stopped, and none held a minute early).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3

from hyperpod_scheduler.cost.fsx import FileSystem
from hyperpod_scheduler.cost.prices import bundled
from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.schedule import Schedule, resolve
from hyperpod_scheduler.store.memory import MemoryStore

ROLE = "arn:aws:iam::123456789012:role/bench"
MONTH_START = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
TICK_MIN = 5
GPU = "ml.g5.12xlarge"
# Every cluster shares a 2.4 TiB FSx for Lustre file system, which keeps billing while it is stopped.
FSX = FileSystem("fs-0123456789abcdef0", 2400, "PERSISTENT_2", 125, found_by="bench")
SCHEDULES = [
    "Mon-Fri 08:00-18:00 UTC",
    "Mon-Fri 08:00-19:00 Europe/Berlin",
    "Mon-Fri 09:00-17:00 America/New_York",
    "Mon-Fri 22:00-06:00 UTC",
    "Mon,Wed,Fri 07:30-18:00 Asia/Tokyo",
]


def request(name: str, workers: int) -> dict[str, Any]:
    def grp(group: str, itype: str, count: int, node: str) -> dict[str, Any]:
        extra = {"PartitionNames": [group]} if node == "Compute" else {}
        return {
            "InstanceGroupName": group,
            "InstanceType": itype,
            "InstanceCount": count,
            "ExecutionRole": ROLE,
            "SlurmConfig": {"NodeType": node, **extra},
        }

    return {
        "ClusterName": name,
        "Orchestrator": {"Slurm": {}},
        "InstanceGroups": [grp("controller", "ml.m5.xlarge", 1, "Controller"), grp("gpu", GPU, workers, "Compute")],
    }


@dataclass
class Member:
    name: str
    size: int
    schedule: Schedule


def capacity(members: list[Member], shortfall: bool) -> dict[str, Any]:
    need = sum(m.size - 1 for m in members)
    if not shortfall:
        return {"instance_types": {GPU: {"available": need * 2}}}
    # Around the European and US morning starts the region is short of GPUs for an hour and a half.
    tight = max(1, int(need * 0.35))
    daily = [
        {"time": "00:00", "available": need * 2},
        {"time": "06:45", "available": tight},
        {"time": "08:15", "available": need * 2},
        {"time": "13:45", "available": tight},
        {"time": "15:15", "available": need * 2},
    ]
    return {"instance_types": {GPU: {"daily": daily}}}


def simulate(members: list[Member], days: int, shortfall: bool) -> dict[str, Any]:
    wall0 = time.perf_counter()
    setup_start = MONTH_START - timedelta(hours=2)
    with running_emulator(virtual_start=setup_start, seed=2, capacity=capacity(members, shortfall)) as emu:
        for m in members:
            emu.backend.dispatch("CreateCluster", request(m.name, m.size - 1))
        emu.advance(2 * 3600)  # every cluster in service at the start of the month
        calls: Counter[str] = Counter()
        session = boto3.Session(aws_access_key_id="b", aws_secret_access_key="b", region_name="us-east-1")
        client = session.client("sagemaker", endpoint_url=emu.endpoint)
        client.meta.events.register("before-call.sagemaker.*", lambda model, **_: calls.update([model.name]))
        events = Collector()
        engine = Engine(MemoryStore(), lambda _r: client, emu.clock.now, events=events)
        governed = [Governed(ref_for(m.name, "us-east-1"), "bench", m.schedule, False) for m in members]

        always_by_type: Counter[str] = Counter()
        for m in members:
            for g in request(m.name, m.size - 1)["InstanceGroups"]:
                always_by_type[g["InstanceType"]] += g["InstanceCount"]
        used_by_type: Counter[str] = Counter()  # instance-minutes holding capacity, per type
        stopped_cluster_min = 0  # cluster-minutes the schedules leave stopped (the FSx keeps billing)
        used_min = 0  # instance-minutes holding capacity
        wanted_stopped_min = 0  # instance-minutes the schedules leave stopped
        unavailable_min = 0  # instance-minutes wanted running but not running
        minutes = days * 24 * 60
        for minute in range(minutes):
            now = emu.clock.now()
            if minute % TICK_MIN == 0:
                tick(engine, governed, now)
                for m in members:
                    if m.schedule.state_at(now) == "running":
                        d = emu.backend.dispatch("DescribeCluster", {"ClusterName": m.name})
                        running = sum(g["CurrentCount"] for g in d["InstanceGroups"])
                        unavailable_min += TICK_MIN * max(0, m.size - running)
            usage = emu.backend.usage()
            used_min += sum(usage.values())
            used_by_type.update(usage)
            stopped_cluster_min += sum(1 for m in members if m.schedule.state_at(now) == "stopped")
            wanted_stopped_min += sum(m.size for m in members if m.schedule.state_at(now) == "stopped")
            emu.advance(60)
    always_on = sum(m.size for m in members) * minutes
    prices = bundled()
    saved_usd = 0.0
    for itype, count in always_by_type.items():
        price = prices.instance(itype)
        if price is not None:
            saved_usd += (count * minutes - used_by_type[itype]) / 60 * price.usd
    fsx_hourly = FSX.hourly(prices) or 0.0
    sent = [e.message.split()[0] for e in events.events if e.kind == "sent"]
    return {
        "always_on_h": always_on / 60,
        "max_saved_h": wanted_stopped_min / 60,
        "saved_h": (always_on - used_min) / 60,
        "unavailable_h": unavailable_min / 60,
        "starts": sent.count("start"),
        "stops": sent.count("stop"),
        "failed": sum(1 for e in events.events if e.kind == "failed"),
        "calls": sum(calls.values()),
        "saved_usd": saved_usd,
        "fsx_residual_usd": stopped_cluster_min / 60 * fsx_hourly,
        "wall_s": time.perf_counter() - wall0,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="6 clusters, 7 days")
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--days", type=int, default=31)
    args = parser.parse_args()
    n, days = (6, 7) if args.quick else (args.clusters, args.days)
    members = [
        Member(f"fleet-{i:03d}", 1 + 2 + (i % 4) * 2, resolve(SCHEDULES[i % len(SCHEDULES)], {})) for i in range(n)
    ]
    print(f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}  tick: every {TICK_MIN} virtual minutes")
    print(
        "| region | clusters | days | instances | always-on inst-h | max saved inst-h | saved inst-h | saved / max "
        "| wanted but not running inst-h | starts / stops sent | failed starts (no capacity) | instance saving "
        "| FSx residual | API calls | wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, shortfall in (("ample capacity", False), ("GPU shortfall at morning starts", True)):
        r = simulate(members, days, shortfall)
        print(
            f"| {label} | {n} | {days} | {sum(m.size for m in members)} | {r['always_on_h']:,.0f} "
            f"| {r['max_saved_h']:,.0f} | {r['saved_h']:,.0f} | {100 * r['saved_h'] / r['max_saved_h']:.2f}% "
            f"| {r['unavailable_h']:,.1f} | {r['starts']} / {r['stops']} | {r['failed']} | ${r['saved_usd']:,.0f} "
            f"| ${r['fsx_residual_usd']:,.0f} "
            f"| {r['calls']:,} | {r['wall_s']:.1f} s |"
        )
    print(
        "\nsaved / max above 100% means capacity the schedules wanted was not there (the shortfall column), "
        "not a better schedule; 'wanted but not running' also holds each start's provisioning time."
    )


if __name__ == "__main__":
    main()
