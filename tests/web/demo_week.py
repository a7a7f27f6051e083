"""The demo's own week (``run_demo``, seven virtual days) kept alive and served: what a user sees after
``hyperpod-scheduler demo --dashboard``. The demo runs in a thread whose ``on_finish`` holds the
emulator and the store open until the tests are done."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hyperpod_scheduler.demo.run import DemoResult, run_demo
from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.web.demo_serve import demo_dashboard
from hyperpod_scheduler.web.service import Dashboard
from tests.web.fleet import serving

DEMO_DAYS = 7.0


@dataclass
class DemoWeek:
    url: str
    dashboard: Dashboard
    emu: Emulator
    result: DemoResult
    state: str


@contextmanager
def demo_week(token: str | None) -> Iterator[DemoWeek]:
    ready, done = threading.Event(), threading.Event()
    box: dict[str, Any] = {}

    def finish(result: DemoResult, emu: Emulator, config: Any, state_path: str) -> None:
        box.update(result=result, emu=emu, state=state_path, dash=demo_dashboard(emu, config, state_path, token))
        ready.set()
        done.wait(timeout=1800)

    def run() -> None:
        try:
            run_demo(days=DEMO_DAYS, on_finish=finish)
        except BaseException as exc:  # surfaced in the test thread below
            box["error"] = exc
            ready.set()

    thread = threading.Thread(target=run, name="demo-week", daemon=True)
    thread.start()
    try:
        if not ready.wait(timeout=600):
            raise AssertionError("the demo week did not finish in 10 minutes")
        if "error" in box:
            raise AssertionError(f"the demo failed: {box['error']!r}")
        with serving(box["dash"]) as url:
            yield DemoWeek(url, box["dash"], box["emu"], box["result"], box["state"])
    finally:
        done.set()
        thread.join(timeout=60)
