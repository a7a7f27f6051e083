"""Schedule decisions per second: ``is_running`` over (schedule, instant) pairs across a mix of kinds.

Run: ``.venv/bin/python bench/schedule_bench.py [--quick] [--pairs N] [--seed S]``. Prints the core count
with each figure. "cold" includes compiling each schedule's weeks on first touch; "warm" repeats the same
pairs with every week already compiled (the steady state of a long-running scheduler).
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from hyperpod_scheduler.schedule import Schedule, load_schedules, resolve

NAMED = {
    "office-bavaria": {"windows": "Mon-Fri 08:00-19:00", "timezone": "Europe/Berlin", "holidays": "DE-BY"},
    "ca-cron": {
        "start": "0 8 * * 1-5",
        "stop": ["0 19 * * 1-5"],
        "timezone": "America/Los_Angeles",
        "holidays": "US-CA",
    },
    "freeze": {"windows": ["always"], "skip_dates": ["2026-12-24", "2026-12-25", "2026-12-31"], "timezone": "UTC"},
}
INLINE = [
    "Mon-Fri 08:00-19:00 Europe/Berlin",
    "Mon-Fri 22:00-06:00 UTC",
    "Mon,Wed,Fri 07:30-18:00 America/New_York, Sat 10:00-14:00 America/New_York",
    "Sun-Thu 09:00-17:00 Asia/Dubai",
    "Mon-Fri 08:00-19:00 Europe/London, 2026-12-26T00:00Z-2027-01-02T00:00Z",
    "always",
]


def schedules() -> list[Schedule]:
    named = load_schedules(NAMED)
    return [*named.values(), *(resolve(expr) for expr in INLINE)]


def timed(label: str, count: int, fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - began
    rate = count / elapsed
    print(f"{label:<44} {count:>9,} in {elapsed:7.3f} s = {rate:>12,.0f}/s   (cores: {os.cpu_count()})")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 pairs instead of 100,000")
    parser.add_argument("--pairs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=4)
    args = parser.parse_args()
    pairs_wanted = args.pairs or (10_000 if args.quick else 100_000)
    rng = random.Random(args.seed)
    kinds = schedules()
    base = datetime(2026, 1, 1, tzinfo=UTC)
    span = int(timedelta(days=730).total_seconds())
    pairs = [(rng.choice(kinds), base + timedelta(seconds=rng.randrange(span))) for _ in range(pairs_wanted)]
    print(f"{len(kinds)} schedule kinds, instants spread over 2026-2027")

    def decide() -> None:
        for schedule, at in pairs:
            schedule.is_running(at)

    timed("is_running, cold (compiles weeks)", len(pairs), decide)
    timed("is_running, warm", len(pairs), decide)

    nexts = pairs[: max(1, len(pairs) // 10)]

    def following() -> None:
        for schedule, at in nexts:
            schedule.next_transitions(at, 1)

    timed("next_transitions(count=1), warm-ish", len(nexts), following)

    def latest() -> None:
        for schedule, at in nexts:
            schedule.last_transition(at)

    timed("last_transition, warm-ish", len(nexts), latest)


if __name__ == "__main__":
    main()
