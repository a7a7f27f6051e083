"""The week timeline: settled stops and starts become per-group segments; the plan follows the schedule."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from hyperpod_scheduler.schedule.named import schedule_from_entry
from hyperpod_scheduler.store.records import HistoryEntry
from hyperpod_scheduler.web.svg import bars_svg, timeline_svg
from hyperpod_scheduler.web.timeline import group_rows

T0 = datetime(2026, 11, 30, tzinfo=UTC)
KEY = "default/us-east-1/c"


def _entry(hours: float, action: str, outcomes: dict[str, str], outcome: str = "ok") -> HistoryEntry:
    at = T0 + timedelta(hours=hours)
    return HistoryEntry(key=KEY, at=at, action=action, actor="s", outcome=outcome, detail={"outcomes": outcomes})


def _kinds(row: object) -> list[tuple[float, float, str]]:
    return [
        ((s.start - T0).total_seconds() / 3600, (s.end - T0).total_seconds() / 3600, s.kind)
        for s in row.segments  # type: ignore[attr-defined]
    ]


def test_kept_groups_run_through_the_night_and_a_partial_start_is_a_shortfall() -> None:
    entries = [
        _entry(20, "stop", {"workers": "stopped 0/0", "p5": "kept 4/4"}),
        _entry(32, "start", {"workers": "partial 3/8", "p5": "restored 4/4"}, outcome="failed"),
        _entry(33, "hold", {}),
    ]
    rows = group_rows(["workers", "p5"], entries, None, T0, T0 + timedelta(hours=40), T0 + timedelta(hours=40))
    assert _kinds(rows[0]) == [(0, 20, "running"), (20, 32, "stopped"), (32, 40, "shortfall")]
    assert _kinds(rows[1]) == [(0, 40, "running")]


def test_future_follows_the_schedule() -> None:
    schedule = schedule_from_entry("s", {"windows": ["Mon-Fri 08:00-18:00"], "timezone": "UTC"})
    now = T0 + timedelta(hours=12)  # Monday noon
    rows = group_rows(["g"], [], schedule, T0, now, T0 + timedelta(days=1))
    assert _kinds(rows[0]) == [(0, 12, "running"), (12, 18, "planned-running"), (18, 24, "planned-stopped")]
    svg = timeline_svg(rows, T0, T0 + timedelta(days=1), now)
    assert svg.count('class="group-row"') == 1 and ">now<" in svg


def test_negative_nights_hang_below_the_zero_line() -> None:
    svg = bars_svg(["a", "b"], [("net", "#000", [100.0, -50.0])], "net <per night>")
    rects = [
        (float(y), float(h))
        for y, h in re.findall(r'<rect x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)"', svg)
    ]
    (y_pos, h_pos), (y_neg, h_neg) = rects[:2]
    assert y_pos + h_pos == pytest.approx(y_neg, abs=0.2)  # both bars meet at the zero line
    assert h_pos == pytest.approx(2 * h_neg, abs=0.2)
    assert "net &lt;per night&gt;" in svg


def test_a_start_with_phases_shows_the_group_starting_from_its_request_with_each_phase() -> None:
    requested = T0 + timedelta(hours=31)
    phases = {
        "p5": {
            "group": "p5",
            "target": 4,
            "checks": True,
            "source": "events",
            "requested": requested.isoformat(),
            "launched": (requested + timedelta(minutes=8)).isoformat(),
            "lifecycle": (requested + timedelta(minutes=20)).isoformat(),
            "health_checks": (requested + timedelta(minutes=55)).isoformat(),
            "running": 4,
        }
    }
    stop = _entry(20, "stop", {"p5": "stopped 0/0"})
    start = HistoryEntry(
        key=KEY,
        at=T0 + timedelta(hours=32),
        action="start",
        actor="s",
        outcome="ok",
        detail={"outcomes": {"p5": "restored 4/4"}, "phases": phases},
    )
    end = T0 + timedelta(hours=40)
    rows = group_rows(["p5"], [stop, start], None, T0, end, end)
    assert _kinds(rows[0]) == [(0, 20, "running"), (20, 31, "stopped"), (31, 32, "starting"), (32, 40, "running")]
    svg = timeline_svg(rows, T0, end, end)
    assert "requested 07:00Z; launched 07:08Z; lifecycle setup passed 07:20Z; health checks passed 07:55Z" in svg
