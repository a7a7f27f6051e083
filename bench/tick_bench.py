"""Fleet tick over the emulator: API calls and wall time per cluster, nothing due and everything due.

    .venv/bin/python bench/tick_bench.py [--clusters 1000] [--quick]

Clusters are created straight through the emulator backend (the creation is not what is measured);
the ticks go through boto3 over HTTP, as in production.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import tracemalloc
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import boto3

from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.memory import MemoryStore

ROLE = "arn:aws:iam::123456789012:role/bench"
START = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)  # Sunday: the office schedule wants every cluster stopped


def request(name: str) -> dict[str, Any]:
    return slurm_request(name, {"cpu": ("ml.c5.xlarge", 2)}, role=ROLE)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="100 clusters")
    parser.add_argument("--concurrency", type=int, default=8, help="clusters handled at once in a tick")
    parser.add_argument("--latency-ms", type=float, default=0, help="added per-request latency, as AWS has")
    args = parser.parse_args()
    n = 100 if args.quick else args.clusters
    capacity = {"instance_types": {"ml.m5.xlarge": "unlimited", "ml.c5.xlarge": "unlimited"}}
    with running_emulator(virtual_start=START, seed=1, capacity=capacity) as emu:
        for i in range(n):
            emu.backend.dispatch("CreateCluster", request(f"bench-{i:05d}"))
        emu.advance(3600)
        emu.faults = {"latency_ms": args.latency_ms}
        calls: Counter[str] = Counter()
        session = boto3.Session(aws_access_key_id="b", aws_secret_access_key="b", region_name="us-east-1")
        client = session.client("sagemaker", endpoint_url=emu.endpoint)
        lock = threading.Lock()

        def count(model: Any, **_: Any) -> None:
            with lock:  # ticks run clusters in threads
                calls[model.name] += 1

        client.meta.events.register("before-call.sagemaker.*", count)
        engine = Engine(MemoryStore(), lambda ref: client, emu.clock.now)
        sched = resolve("Mon-Fri 08:00-18:00 UTC", {})
        fleet = [Governed(ref_for(f"bench-{i:05d}", "us-east-1"), "office", sched, False) for i in range(n)]

        def timed(label: str) -> None:
            calls.clear()
            tracemalloc.start()
            t0 = time.perf_counter()
            tick(engine, fleet, emu.clock.now(), concurrency=args.concurrency)
            wall = time.perf_counter() - t0
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            total = sum(calls.values())
            per = {k: round(v / n, 3) for k, v in sorted(calls.items())}
            print(
                f"| {label} | {n} | {wall:.2f} s | {1000 * wall / n:.2f} ms | {total / n:.2f} | {per} | "
                f"{peak / 2**20:.1f} MiB |"
            )

        print(
            f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}  tick concurrency: {args.concurrency}  "
            f"added latency: {args.latency_ms:g} ms"
        )
        print("| tick | clusters | wall | per cluster | API calls per cluster | by operation | peak memory |")
        print("|---|---|---|---|---|---|---|")
        timed("everything due (first sight: stop)")
        emu.advance(3600)
        timed("following the stops to settled")
        emu.advance(600)
        timed("nothing due")
        emu.advance((datetime(2026, 11, 30, 8, 0, tzinfo=UTC) - emu.clock.now()).total_seconds())
        timed("everything due (Monday 08:00: start)")


if __name__ == "__main__":
    main()
