"""Ready-by hit rate over a simulated month with random provisioning times.

    .venv/bin/python bench/ready_by_bench.py [--days 30] [--clusters 5] [--quick]

Each cluster has a `ready_by` office-hours schedule; provisioning takes 10 to 40 minutes per node (seeded
jitter in the emulator). A start is a hit when every group is restored at or before the schedule's start.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import UTC, datetime, timedelta

import boto3

from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.config.model import ReadyBy
from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.schedule import load_schedules
from hyperpod_scheduler.store.memory import MemoryStore

ROLE = "arn:aws:iam::123456789012:role/bench"
START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def request(name: str) -> dict:  # type: ignore[type-arg]
    ext = {"SourceS3Uri": "s3://sagemaker-bench/lc/", "OnInitComplete": "ext.sh"}
    return slurm_request(name, {"gpu": ("ml.g5.12xlarge", 4)}, role=ROLE, lifecycle={"gpu": ext})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--clusters", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="10 days, 2 clusters")
    args = parser.parse_args()
    days, n = (10, 2) if args.quick else (args.days, args.clusters)
    capacity = {"timing": {"provisioning": [600, 2400]}}
    schedules = load_schedules({"office": {"windows": ["Mon-Fri 08:00-18:00 UTC"], "ready_by": True}})
    settings = ReadyBy()
    t0 = time.perf_counter()
    with running_emulator(virtual_start=START, seed=5, capacity=capacity) as emu:
        client = boto3.Session(aws_access_key_id="b", aws_secret_access_key="b", region_name="us-east-1").client(
            "sagemaker", endpoint_url=emu.endpoint
        )
        names = [f"rb-{i}" for i in range(n)]
        for name in names:
            client.create_cluster(**request(name))
        emu.advance(3 * 3600)
        events = Collector()
        engine = Engine(MemoryStore(), lambda r: client, emu.clock.now, events=events)
        governed = [Governed(ref_for(name, "us-east-1"), "office", schedules["office"], False) for name in names]
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
    starts = [k for k in sent if datetime.fromisoformat(k[1]).weekday() < 5]
    hits = [k for k in starts if k in ready and ready[k] <= datetime.fromisoformat(f"{k[1]}T08:00:00+00:00")]
    leads = [(datetime.fromisoformat(f"{k[1]}T08:00:00+00:00") - sent[k]).total_seconds() / 60 for k in starts]
    spare = [(datetime.fromisoformat(f"{k[1]}T08:00:00+00:00") - ready[k]).total_seconds() / 60 for k in hits]
    print(f"cores: {os.cpu_count()}  simulated: {days:g} days x {n} clusters in {time.perf_counter() - t0:.1f} s")
    print("| starts | ready on time | hit rate | mean lead (min) | lead range (min) | median spare at 08:00 (min) |")
    print("|---|---|---|---|---|---|")
    rate = 100 * len(hits) / len(starts) if starts else 0.0
    print(
        f"| {len(starts)} | {len(hits)} | {rate:.1f}% | {statistics.mean(leads):.0f} | "
        f"{min(leads):.0f}-{max(leads):.0f} | {statistics.median(spare) if spare else 0:.0f} |"
    )


if __name__ == "__main__":
    main()
