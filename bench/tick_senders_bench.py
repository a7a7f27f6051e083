"""What the call deadlines cost the fleet tick, measured interleaved: the same first tick (everything due:
describe, intent, stop) with the deadlines kept by the watchdog (production), by worker threads (the
fallback where the watchdog cannot be installed), and not kept at all (attribution only), beside the
boto3 floor and the tick's own client alone, against one replay server.

    .venv/bin/python bench/tick_senders_bench.py [--clusters 500] [--rounds 8] [--store sqlite|memory] [--quick]

Each figure is a fresh process (``tick_bench.py``'s workers); the variants run round after round in an
order that alternates, so a busy moment of the shared machine falls on all of them alike. Medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import tick_bench as tb  # noqa: E402  (the workers and servers live there)

K = TypeVar("K")


def run(args: list[str], script: Path = HERE / "tick_bench.py") -> tuple[float, float]:
    """One worker process of ``script``: the (wall, CPU) seconds it printed last, as JSON."""
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **tb.CREDENTIALS},
        check=False,
        timeout=1800,
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:2])} failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    row = result["rows"][0] if "rows" in result else result
    return float(row["wall"]), float(row["cpu"])


def recorded(n: int) -> dict[str, bytes]:
    """The emulator's answers for a fleet of ``n`` clusters, for the replay server."""
    os.environ.update(tb.CREDENTIALS)
    with tb.emulator_process() as endpoint:
        tb.create_fleet(endpoint, n)
        return tb.raw_answers(endpoint)


def interleaved(variants: Mapping[K, list[str]], rounds: int) -> dict[K, tuple[float, float]]:
    """Median (wall, CPU) seconds of each variant's worker, run round after round in alternating order."""
    results: dict[K, list[tuple[float, float]]] = {}
    for i in range(rounds):
        for key in list(variants) if i % 2 == 0 else list(reversed(list(variants))):
            results.setdefault(key, []).append(run(variants[key]))
    return {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clusters", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--store", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--quick", action="store_true", help="200 clusters, 3 rounds")
    args = parser.parse_args()
    n, rounds = (200, 3) if args.quick else (args.clusters, args.rounds)
    answers = recorded(n)
    common = ["--clusters", str(n), "--concurrency", str(args.concurrency), "--store", args.store]
    with tb.replay_server(answers) as ep:
        variants = {
            "boto3 floor": ["--worker", "floor", "--endpoint", ep],
            "the tick's client alone": ["--worker", "client-floor", "--endpoint", ep],
            "tick, watchdog (production)": ["--worker", "tick", "--endpoint", ep, "--replay"],
            "tick, worker threads": ["--worker", "tick", "--endpoint", ep, "--replay", "--threaded"],
            "tick, no deadlines": ["--worker", "tick", "--endpoint", ep, "--replay", "--unbounded"],
        }
        results = interleaved({name: [*a, *common] for name, a in variants.items()}, rounds)
    floor_wall, floor_cpu = results["boto3 floor"]
    print(
        f"{n:,} clusters, concurrency {args.concurrency}, store {args.store}, {rounds} rounds interleaved; "
        "per cluster: DescribeCluster + UpdateCluster (floor, client) or the first tick (the rest)"
    )
    for name, (wall, cpu) in results.items():
        print(
            f"  {name:<28} wall {1000 * wall / n:5.2f} ms ({wall / floor_wall:4.2f}x the floor)  "
            f"CPU {1000 * cpu / n:5.2f} ms ({cpu / floor_cpu:4.2f}x)"
        )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
