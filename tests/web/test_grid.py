"""The schedule grid: a painted week becomes windows that the schedule parser reads back as the same week."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule.named import schedule_from_entry
from hyperpod_scheduler.web import grid as grids

MONDAY = date(2026, 11, 30)  # no DST change in this week in either zone below

rows = st.lists(st.booleans(), min_size=grids.SLOTS, max_size=grids.SLOTS)


@settings(max_examples=40, deadline=None)
@given(st.lists(rows, min_size=7, max_size=7), st.sampled_from(["UTC", "Europe/Berlin", "America/Los_Angeles"]))
def test_painted_grid_round_trips_through_windows(grid: list[list[bool]], tz: str) -> None:
    windows = grids.windows_from_grid(grid)
    schedule = schedule_from_entry("painted", {"windows": windows, "timezone": tz})
    assert grids.grid_for(schedule, ZoneInfo(tz), MONDAY) == grid


def test_office_hours_become_one_readable_window() -> None:
    grid = [[32 <= s < 76 if d < 5 else False for s in range(grids.SLOTS)] for d in range(7)]
    assert grids.windows_from_grid(grid) == ["Mon-Fri 08:00-19:00"]


def test_an_empty_grid_is_never() -> None:
    assert grids.windows_from_grid([[False] * grids.SLOTS for _ in range(7)]) == ["never"]


def test_viewer_grid_shifts_with_the_timezone() -> None:
    schedule = schedule_from_entry("x", {"windows": ["Mon 08:00-09:00"], "timezone": "Europe/Berlin"})
    in_utc = grids.grid_for(schedule, ZoneInfo("UTC"), MONDAY)
    assert [s for s, on in enumerate(in_utc[0]) if on] == list(range(28, 32))  # 07:00-08:00 UTC in winter


def test_edit_keeps_holidays_and_drops_cron() -> None:
    value = {"timezone": "UTC", "start": ["0 6 * * 1-6"], "stop": ["0 22 * * 1-6"], "holidays": "US-CA"}
    grid = [[True] * grids.SLOTS] + [[False] * grids.SLOTS for _ in range(6)]
    entry = grids.edited_entry("r", value, grid, "UTC")
    assert entry == {"timezone": "UTC", "holidays": "US-CA", "windows": ["Mon 00:00-24:00"]}


@pytest.mark.parametrize(
    ("cells", "field"),
    [(["7-0"], "'7-0' is outside"), (["a-b"], "'a-b' is not"), (["1-96"], "'1-96' is outside")],
)
def test_bad_cells_are_one_line_errors(cells: list[str], field: str) -> None:
    with pytest.raises(UsageError, match=field):
        grids.grid_from_cells(cells)


def test_unknown_viewer_timezone_is_refused() -> None:
    with pytest.raises(UsageError, match="tz: 'Mars/Base'"):
        grids.viewer_zone("Mars/Base")
    assert grids.week_monday(datetime(2026, 12, 6, 23, 30, tzinfo=UTC), ZoneInfo("Asia/Tokyo")) == date(2026, 12, 7)
