"""Ready-by hit rate over a simulated month, deep health checks modelled, against an oracle.

    .venv/bin/python bench/ready_by_bench.py [--days 30] [--clusters 6] [--quick]

Each cluster (Continuous mode; half P5, half G5 workers, every worker group running on-start deep
health checks) has a `ready_by` office-hours schedule. Provisioning takes 5 to 15 minutes per node,
deep health checks 45 to 55 minutes on P5 and 20 to 25 on G5 (seeded jitter in the emulator; AWS
publishes no figure), and on about one morning in six per instance type the pool is empty for 5 to 25
minutes some time between 06:15 and 07:15 (a capacity delay: a launch waits for the next retry). An
outage of hours is not in this bench: no lead time short of hours covers it, and that morning's
notification (what is up, what waits for capacity) is what a team gets instead. A start is a hit when
every group is up at or before the schedule's start; readiness is the API's (no Slurm in this bench).

The oracle knows each morning's true start-to-ready duration and starts exactly that early: its mean
lead is the mean of those durations. Target: at least 98% on time at a mean lead no more than 20% above
the oracle's.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3

from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.config.model import Policy, ReadyBy
from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import ClusterSettings, Engine
from hyperpod_scheduler.schedule import load_schedules
from hyperpod_scheduler.store.memory import MemoryStore

ROLE = "arn:aws:iam::123456789012:role/bench"
START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
TYPES = ("ml.p5.48xlarge", "ml.g5.12xlarge")
CHECKS = ["InstanceStress", "InstanceConnectivity"]


def request(name: str, itype: str) -> dict[str, Any]:
    count = 2 if itype.startswith("ml.p5") else 4
    out = slurm_request(name, {"gpu": (itype, count)}, role=ROLE, continuous=True)
    out["InstanceGroups"][1]["OnStartDeepHealthChecks"] = CHECKS
    return out


def capacity(days: float, seed: int) -> tuple[dict[str, Any], int]:
    """Unlimited pools, except random mornings on which a type's pool is empty for 5 to 25 minutes,
    starting between 06:15 and 07:15 (when the starts launch)."""
    rng = random.Random(seed)
    types: dict[str, Any] = {}
    delays = 0
    for itype in TYPES:
        steps = []
        for d in range(int(days) + 1):
            day = (START + timedelta(days=d)).replace(hour=6, minute=15)
            if day.weekday() < 5 and rng.random() < 1 / 6:
                delays += 1
                empty = day + timedelta(minutes=rng.uniform(0, 60))
                steps.append({"at": empty.isoformat(), "available": 0})
                back = empty + timedelta(minutes=rng.uniform(5, 25))
                steps.append({"at": back.isoformat(), "available": 1000})
        types[itype] = {"available": 1000, "schedule": steps}
    timing = {
        "provisioning": [300, 900],
        "deep_health_check": {"ml.p5*": [2700, 3300], "ml.g5*": [1200, 1500]},
    }
    return {"instance_types": types, "timing": timing}, delays


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--clusters", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="10 days, 2 clusters")
    args = parser.parse_args()
    days, n = (10, 2) if args.quick else (args.days, args.clusters)
    cap, delay_mornings = capacity(days, seed=11)
    schedules = load_schedules({"office": {"windows": ["Mon-Fri 08:00-18:00 UTC"], "ready_by": True}})
    settings = ReadyBy()
    t0 = time.perf_counter()
    with running_emulator(virtual_start=START, seed=5, capacity=cap) as emu:
        client = boto3.Session(aws_access_key_id="b", aws_secret_access_key="b", region_name="us-east-1").client(
            "sagemaker", endpoint_url=emu.endpoint
        )
        names = [f"rb-{i}" for i in range(n)]
        for i, name in enumerate(names):
            client.create_cluster(**request(name, TYPES[i % 2]))
        emu.advance(3 * 3600)
        events = Collector()
        # The bench measures mornings, not the capacity gamble: P5 workers are released at night.
        policy = Policy(release_scarce_capacity=True)
        engine = Engine(
            MemoryStore(),
            lambda r: client,
            emu.clock.now,
            events=events,
        )
        settings = ClusterSettings(policy=policy)
        governed = [
            Governed(ref_for(name, "us-east-1").governed(settings), "office", schedules["office"], False)
            for name in names
        ]
        end = emu.clock.now() + timedelta(days=days)
        while emu.clock.now() < end:
            tick(engine, governed, emu.clock.now(), ready_by=settings)
            emu.advance(300)
    sent: dict[tuple[str, str], datetime] = {}
    ready: dict[tuple[str, str], datetime] = {}
    for e in events.events:
        day = e.at.date().isoformat()
        if e.kind == "sent" and e.message.startswith("start"):
            sent.setdefault((e.cluster, day), e.at)
        if e.kind == "settled" and e.message.startswith("start"):
            ready.setdefault((e.cluster, day), e.at)

    def eight(day: str) -> datetime:
        return datetime.fromisoformat(f"{day}T08:00:00+00:00")

    starts = [k for k in sent if datetime.fromisoformat(k[1]).weekday() < 5 and k in ready]
    hits = [k for k in starts if ready[k] <= eight(k[1])]
    leads = [(eight(k[1]) - sent[k]).total_seconds() / 60 for k in starts]
    oracle = [(ready[k] - sent[k]).total_seconds() / 60 for k in starts]
    spare = [(eight(k[1]) - ready[k]).total_seconds() / 60 for k in hits]
    rate = 100 * len(hits) / len(starts) if starts else 0.0
    ratio = statistics.mean(leads) / statistics.mean(oracle) if starts else 0.0
    print(
        f"cores: {os.cpu_count()}  simulated: {days:g} days x {n} clusters in {time.perf_counter() - t0:.1f} s; "
        f"capacity delays on {delay_mornings} type-mornings"
    )
    print(
        "| starts | ready on time | hit rate | mean lead (min) | oracle mean lead (min) | lead / oracle "
        "| lead range (min) | median spare at 08:00 (min) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print(
        f"| {len(starts)} | {len(hits)} | {rate:.1f}% | {statistics.mean(leads):.0f} | {statistics.mean(oracle):.0f} "
        f"| {ratio:.2f} | {min(leads):.0f}-{max(leads):.0f} | {statistics.median(spare) if spare else 0:.0f} |"
    )
    late = sorted(((ready[k] - eight(k[1])).total_seconds() / 60, k[0], k[1]) for k in starts if k not in hits)
    if late:
        print("late: " + ", ".join(f"{c} {d} by {m:.0f} min" for m, c, d in late))
    print(f"target: >= 98% on time and lead / oracle <= 1.20: {'met' if rate >= 98 and ratio <= 1.2 else 'NOT met'}")


if __name__ == "__main__":
    main()
