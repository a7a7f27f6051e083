"""The timeline: stop/start lines become per-group segments (kept, blocked, held, shortfall); the plan
follows the schedule, the protections and a hold in force; history lines become markers."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hyperpod_scheduler.schedule.named import schedule_from_entry
from hyperpod_scheduler.store.records import HistoryEntry
from hyperpod_scheduler.web.svg import bars_svg, timeline_svg
from hyperpod_scheduler.web.timeline import group_rows, markers

T0 = datetime(2026, 11, 30, tzinfo=UTC)  # a Monday
KEY = "default/us-east-1/c"
OFFICE = schedule_from_entry("s", {"windows": ["Mon-Fri 08:00-18:00"], "timezone": "UTC"})


def _entry(hours: float, action: str, outcomes: dict[str, Any] | None = None, outcome: str = "ok", **detail: Any):
    at = T0 + timedelta(hours=hours)
    return HistoryEntry(
        key=KEY, at=at, action=action, actor="s", outcome=outcome, detail={"outcomes": outcomes or {}, **detail}
    )


def _kinds(row: Any) -> list[tuple[float, float, str]]:
    return [((s.start - T0).total_seconds() / 3600, (s.end - T0).total_seconds() / 3600, s.kind) for s in row.segments]


def test_kept_groups_bill_through_the_night_and_a_partial_start_is_a_shortfall() -> None:
    entries = [
        _entry(20, "stop", {"workers": "stopped 0/0", "p5": "kept 4/4"}),
        _entry(32, "start", {"workers": "partial 3/8", "p5": "restored 4/4"}, outcome="failed"),
    ]
    rows = group_rows(["workers", "p5"], entries, None, T0, T0 + timedelta(hours=40), T0 + timedelta(hours=40))
    assert _kinds(rows[0]) == [(0, 20, "running"), (20, 32, "stopped"), (32, 40, "shortfall")]
    assert _kinds(rows[1]) == [(0, 20, "running"), (20, 32, "kept"), (32, 40, "running")]


def test_a_stop_that_sent_nothing_leaves_the_cluster_running_not_kept_or_stopped() -> None:
    # The engine sends nothing when every group with nodes is protected: the cluster was never stopped,
    # so no segment may call it "kept running while stopped" (issue 27 item 2).
    noop = _entry(20, "stop", {"p5": {"outcome": "kept", "current": 4, "target": 4}}, outcome="noop")
    rows = group_rows(
        ["p5"],
        [noop, _entry(30, "start", outcome="noop")],
        None,
        T0,
        T0 + timedelta(hours=36),
        T0 + timedelta(hours=36),
    )
    assert _kinds(rows[0]) == [(0, 36, "running")]


def test_a_cluster_that_stops_nothing_is_planned_running_through_its_nights() -> None:
    now = T0 + timedelta(hours=6)
    rows = group_rows(["p5"], [], OFFICE, T0, now, T0 + timedelta(days=1), kept={"p5"}, stops_nothing=True)
    assert {k for _, _, k in _kinds(rows[0])} == {"running", "planned-running"}


def test_nothing_is_drawn_before_the_cluster_was_created() -> None:
    created = T0 + timedelta(days=6, hours=23, minutes=58)  # two minutes before now
    now, end = T0 + timedelta(days=7), T0 + timedelta(days=9)
    rows = group_rows(["g"], [], OFFICE, T0, now, end, since=created)
    assert rows[0].segments[0].start == created
    assert all(s.start >= created for s in rows[0].segments)
    running = [s for s in rows[0].segments if s.kind == "running"]
    assert sum((s.end - s.start).total_seconds() for s in running) == 120  # two minutes, not a week
    svg = timeline_svg(rows, T0, end, now, since=created)
    assert 'class="created"' in svg and "cluster created Sun 6 Dec 23:58" in svg
    # Created after the window: an empty row, nothing invented.
    assert group_rows(["g"], [], OFFICE, T0, now, end, since=end + timedelta(hours=1))[0].segments == ()


def test_every_segment_tooltip_carries_dates() -> None:
    rows = group_rows(["g"], [], None, T0, T0 + timedelta(days=7), T0 + timedelta(days=7))
    svg = timeline_svg(rows, T0, T0 + timedelta(days=7), T0 + timedelta(days=7))
    titles = re.findall(r'<rect class="seg [^"]*"[^>]*><title>([^<]*)</title>', svg)
    assert titles == ["running: Mon 30 Nov 00:00 - Mon 7 Dec 00:00 UTC"]


def test_a_blocked_stop_leaves_the_cluster_running_in_its_own_colour_until_the_next_stop() -> None:
    entries = [
        _entry(22, "stop", outcome="blocked", reason="checkpoints: job 4711"),
        _entry(46, "stop", {"g": "stopped 0/0"}),
    ]
    rows = group_rows(["g"], entries, None, T0, T0 + timedelta(hours=50), T0 + timedelta(hours=50))
    assert _kinds(rows[0]) == [(0, 22, "running"), (22, 46, "blocked"), (46, 50, "stopped")]


def test_a_hold_paints_over_the_schedule_until_released_and_into_the_plan() -> None:
    entries = [
        _entry(10, "hold", state="running", until=None),
        _entry(14, "release"),
        _entry(15, "hold", state="running"),
    ]
    now = T0 + timedelta(hours=16)
    rows = group_rows(
        ["g"], entries, OFFICE, T0, now, T0 + timedelta(hours=30), held=True, held_until=T0 + timedelta(hours=20)
    )
    assert _kinds(rows[0]) == [
        (0, 10, "running"),
        (10, 14, "held"),
        (14, 15, "running"),
        (15, 16, "held"),
        (16, 20, "planned-held"),
        (20, 30, "planned-stopped"),
    ]


def test_planned_nights_of_a_protected_group_are_planned_kept() -> None:
    now = T0 + timedelta(hours=12)  # Monday noon
    rows = group_rows(["p5", "cpu"], [], OFFICE, T0, now, T0 + timedelta(days=1), kept={"p5"})
    assert _kinds(rows[0]) == [(0, 12, "running"), (12, 18, "planned-running"), (18, 24, "planned-kept")]
    assert _kinds(rows[1]) == [(0, 12, "running"), (12, 18, "planned-running"), (18, 24, "planned-stopped")]
    svg = timeline_svg(rows, T0, T0 + timedelta(days=1), now)
    assert svg.count('class="group-row"') == 2 and ">now<" in svg


def test_markers_say_what_happened_and_are_drawn_in_the_window() -> None:
    entries = [
        _entry(20, "stop", {"g": "stopped 0/0"}),
        _entry(22, "stop", outcome="blocked", reason="checkpoints: job 4711 writes to local NVMe"),
        _entry(30, "start", outcome="noop", reason="already at the recorded sizes"),
        _entry(90, "stop", {"g": "stopped 0/0"}),  # outside the window
    ]
    marks = markers(entries, T0, T0 + timedelta(hours=48))
    assert [(m.kind, m.label.split(":")[0]) for m in marks] == [("ok", "stop"), ("bad", "stop")]
    assert "job 4711" in marks[1].label
    rows = group_rows(["g"], entries, None, T0, T0 + timedelta(hours=48), T0 + timedelta(hours=48))
    svg = timeline_svg(rows, T0, T0 + timedelta(hours=48), T0 + timedelta(hours=48), marks)
    assert svg.count('class="mark ') == 2 and "job 4711" in svg


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
