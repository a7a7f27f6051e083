"""Where the first tick's time goes beyond the boto3 floor, part by part, at concurrency 1 and 8: the floor,
the tick's own client alone, the tick with the in-memory store (no SQLite: no lock, no fsync), and the
tick with the SQLite store (production), against one replay server, interleaved.

    .venv/bin/python bench/tick_parts_bench.py [--clusters 500] [--rounds 5] [--quick]

Each ratio is against the floor at the same concurrency. At concurrency 1 nothing waits on a lock, a
thread switch or another thread's fsync: what is left there is work, which more threads cannot take away.
Each figure is a fresh process (``tick_bench.py``'s workers); medians over rounds of alternating order.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import tick_bench as tb  # noqa: E402  (the workers and servers live there)
from tick_senders_bench import interleaved, recorded  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clusters", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="200 clusters, 3 rounds")
    args = parser.parse_args()
    n, rounds = (200, 3) if args.quick else (args.clusters, args.rounds)
    answers = recorded(n)
    with tb.replay_server(answers) as ep:
        parts = {
            "boto3 floor": ["--worker", "floor", "--endpoint", ep],
            "the tick's client alone": ["--worker", "client-floor", "--endpoint", ep],
            "tick, memory store": ["--worker", "tick", "--endpoint", ep, "--replay", "--store", "memory"],
            "tick, sqlite store": ["--worker", "tick", "--endpoint", ep, "--replay", "--store", "sqlite"],
        }
        # The floor and the client ignore --store; the ticks name theirs (the last --store given wins).
        results = interleaved(
            {
                (c, name): ["--store", "memory", *a, "--clusters", str(n), "--concurrency", str(c)]
                for c in (1, 8)
                for name, a in parts.items()
            },
            rounds,
        )
    print(
        f"{n:,} clusters, {rounds} rounds interleaved; per cluster: DescribeCluster + UpdateCluster (floor, "
        "client) or the first tick (describe, intent, stop); ratios against the floor at the same concurrency"
    )
    for c in (1, 8):
        floor_wall, floor_cpu = results[(c, "boto3 floor")]
        print(f"concurrency {c}")
        for name in parts:
            wall, cpu = results[(c, name)]
            print(
                f"  {name:<24} wall {1000 * wall / n:5.2f} ms ({wall / floor_wall:4.2f}x)  "
                f"CPU {1000 * cpu / n:5.2f} ms ({cpu / floor_cpu:4.2f}x)"
            )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
