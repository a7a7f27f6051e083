"""How many examples each fuzz test gets, and how a CLI run is bounded in time."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

from hypothesis import HealthCheck, settings

T = TypeVar("T")
LONG = os.environ.get("HYPERPOD_SCHEDULER_RUN_SLOW") == "1"
FACTOR = int(os.environ.get("HYPERPOD_SCHEDULER_FUZZ_FACTOR", "40" if LONG else "1"))
HANG_S = 60.0  # one example longer than this is a hang, whatever the machine's load


def examples(ci: int) -> settings:
    """``ci`` examples in CI, ``ci * FACTOR`` in a long run; no per-example deadline (the machine is shared:
    slowness is not a finding, a hang is, and ``bounded`` catches that)."""
    return settings(
        max_examples=ci * FACTOR,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def bounded(work: Callable[[], T], what: str) -> T:
    """Run ``work`` on a thread and fail (naming ``what``) if it has not finished within ``HANG_S``."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed back to the test thread as it is
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_S)
    if thread.is_alive():
        raise AssertionError(f"hang: {what} did not finish within {HANG_S:g} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
