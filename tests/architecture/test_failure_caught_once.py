"""A cluster's failure is caught in one place (``engine.fleet.caught``), and reported once.

Elsewhere in the engine, the app layer and the Lambda worker, a broad ``except`` may only turn a part's
own failure into a safe reading of that part (a guard that cannot run blocks the stop; phases that
cannot be read are left as they were; unreadable Slurm roles keep the head). Each such place is listed
here with why; a new one fails this test until it says why it is not containment."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.memory import MemoryStore

SRC = Path(__file__).resolve().parents[2] / "src" / "hyperpod_scheduler"
ALLOWED = {
    "app/looks.py": "a dashboard look that fails is that cluster's failed look (shown stale, since when); "
    "the one refresh still reads the others",
    "engine/fleet.py": "caught: the one place a cluster's failure is caught and reported",
    "engine/guard_round.py": "a guard that cannot run blocks the stop; a Slurm side failing after a start is said",
    "engine/settling.py": "phases are for seeing: a look that fails leaves them as they were",
    "engine/slurm_roles.py": "roles that cannot be read are unknown: the head is kept",
}
BROAD = re.compile(r"except\s+(Exception|BaseException)\b|except\s*:")


def test_broad_excepts_are_the_one_catch_or_a_safe_reading_of_one_part() -> None:
    places = [SRC / "engine", SRC / "app", SRC / "deploy" / "worker.py", SRC / "deploy" / "handlers.py"]
    files = [f for p in places for f in (sorted(p.rglob("*.py")) if p.is_dir() else [p])]
    found = {str(f.relative_to(SRC)) for f in files if BROAD.search(f.read_text(encoding="utf-8"))}
    assert found <= set(ALLOWED), f"broad excepts outside the listed places: {sorted(found - set(ALLOWED))}"
    assert "engine/fleet.py" in found


class BrokenStore(MemoryStore):
    """A store that fails for one cluster's key (a damaged row, a throttled table)."""

    def get(self, key: str) -> Any:
        if key.endswith("/bad"):
            raise RuntimeError("damaged row")
        return super().get(key)


def test_a_clusters_failure_is_its_result_reported_once_and_the_others_go_on() -> None:
    events = Collector()
    now = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)

    def no_aws(ref: Any) -> Any:
        raise AssertionError("a quiet tick makes no AWS call")

    engine = Engine(BrokenStore(), no_aws, lambda: now, events=events)
    never = resolve("never", {})
    fleet = [Governed(ref_for(n, "us-east-1", account="123456789012"), "n", never, False) for n in ("bad", "good")]
    engine.store.put(engine.store.get("123456789012/us-east-1/good") or _stopped("good", now), expected_version=None)
    results = tick(engine, fleet, now)
    assert [(r.cluster, r.kind) for r in results] == [("bad", "error"), ("good", "quiet")]
    errors = [e for e in events.events if e.kind == "error"]
    assert [(e.cluster, e.message) for e in errors] == [("bad", "unexpected RuntimeError: damaged row")]


def _stopped(name: str, now: datetime) -> Any:
    from hyperpod_scheduler.store.records import ClusterRecord

    return ClusterRecord.new(f"123456789012/us-east-1/{name}", now).evolve(
        applied_state="stopped", applied_transition_at=now
    )
