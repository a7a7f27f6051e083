"""Schedules as a 7-day by 24-hour grid of 15-minute cells, and a painted grid back to windows.

Pure functions: the week is passed in. The editable grid is the schedule's weekly pattern in its own
timezone, without holidays and skip dates (those stay in the config untouched and are listed beside it),
so saving a grid never turns a holiday into a permanent gap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs.text import quoted
from hyperpod_scheduler.schedule import Schedule
from hyperpod_scheduler.schedule.clock import zone as iana_zone
from hyperpod_scheduler.schedule.named import schedule_from_entry
from hyperpod_scheduler.schedule.terms import DAY_NAMES

SLOTS = 96  # 15-minute cells per day
DAYS = 7
Grid = list[list[bool]]


def viewer_zone(text: str | None) -> ZoneInfo:
    """The viewer's IANA timezone from a query parameter; UTC when none is given. Judged by the one zone
    rule (schedule/clock.py): ``Europe`` (a folder of zones) or a 300-character name raised OSError from
    ZoneInfo, a 500 without the security headers, before it went through it."""
    name = (text or "UTC").strip() or "UTC"
    try:
        return iana_zone(name)
    except UsageError:
        raise UsageError(f"tz: {quoted(name)} is not an IANA timezone (e.g. Europe/Berlin)") from None


def week_monday(now: datetime, zone: ZoneInfo) -> date:
    local = now.astimezone(zone).date()
    return local - timedelta(days=local.weekday())


def grid_for(schedule: Schedule, zone: ZoneInfo, monday: date) -> Grid:
    """Whether the schedule runs at the start of each 15-minute cell of the week from ``monday`` in ``zone``."""
    grid: Grid = []
    for d in range(DAYS):
        day = monday + timedelta(days=d)
        row = []
        for s in range(SLOTS):
            wall = datetime.combine(day, time(s // 4, (s % 4) * 15), tzinfo=zone)
            row.append(schedule.is_running(wall))
        grid.append(row)
    return grid


def entry_mapping(value: Any) -> dict[str, Any]:
    """A ``schedules:`` value as a mapping (an inline expression string is a one-window schedule)."""
    if isinstance(value, str):
        return {"windows": [value]}
    if isinstance(value, Mapping):
        return dict(value)
    raise UsageError(f"schedule: expected a mapping or an expression string, got {type(value).__name__}")


def pattern_of(name: str, value: Any) -> Schedule:
    """The schedule without holidays and skip dates: its plain weekly pattern."""
    entry = entry_mapping(value)
    entry.pop("holidays", None)
    entry.pop("skip_dates", None)
    return schedule_from_entry(name, entry)


def _hhmm(slot: int) -> str:
    return f"{slot // 4:02d}:{(slot % 4) * 15:02d}"


def _runs(row: Sequence[bool]) -> tuple[tuple[int, int], ...]:
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for i, on in enumerate([*row, False]):
        if on and start is None:
            start = i
        elif not on and start is not None:
            runs.append((start, i))
            start = None
    return tuple(runs)


def _days_text(days: Sequence[int]) -> str:
    # Consecutive days become a range (Mon-Fri); others are listed (Mon,Wed).
    parts: list[str] = []
    i = 0
    while i < len(days):
        j = i
        while j + 1 < len(days) and days[j + 1] == days[j] + 1:
            j += 1
        first, last = DAY_NAMES[days[i]], DAY_NAMES[days[j]]
        parts.append(first if i == j else (f"{first},{last}" if j == i + 1 else f"{first}-{last}"))
        i = j + 1
    return ",".join(parts)


def windows_from_grid(grid: Grid) -> list[str]:
    """Inline window expressions (in the schedule's timezone) for a painted grid; ``never`` if empty."""
    check_grid(grid)
    by_runs: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for d, row in enumerate(grid):
        runs = _runs(row)
        if runs:
            by_runs.setdefault(runs, []).append(d)
    windows = []
    for runs, days in sorted(by_runs.items(), key=lambda item: item[1][0]):
        for a, b in runs:
            end = "24:00" if b == SLOTS else _hhmm(b)
            windows.append(f"{_days_text(days)} {_hhmm(a)}-{end}")
    return windows or ["never"]


def check_grid(grid: Any) -> Grid:
    if (
        not isinstance(grid, list)
        or len(grid) != DAYS
        or any(not isinstance(r, list) or len(r) != SLOTS or any(not isinstance(c, bool) for c in r) for r in grid)
    ):
        raise UsageError(f"grid: expected {DAYS} rows (Mon..Sun) of {SLOTS} true/false 15-minute cells")
    return grid


def grid_from_cells(cells: Sequence[str]) -> Grid:
    """A grid from form checkbox values ``"<day>-<slot>"`` (day 0 = Monday)."""
    grid = [[False] * SLOTS for _ in range(DAYS)]
    for cell in cells:
        try:
            d_text, s_text = cell.split("-", 1)
            d, s = int(d_text), int(s_text)
        except ValueError:
            raise UsageError(f"cell: {cell!r} is not '<day>-<slot>'") from None
        if not (0 <= d < DAYS and 0 <= s < SLOTS):
            raise UsageError(f"cell: {cell!r} is outside the week (day 0-6, slot 0-95)")
        grid[d][s] = True
    return grid


def edited_entry(name: str, value: Any, grid: Grid, timezone: str) -> dict[str, Any]:
    """The config entry with its windows replaced by the grid's (cron entries give way to windows).
    Holidays, skip dates, mode, ready_by and the description are kept."""
    entry = entry_mapping(value)
    entry.pop("start", None)
    entry.pop("stop", None)
    entry["windows"] = windows_from_grid(grid)
    entry["timezone"] = timezone
    schedule_from_entry(name, entry)  # refuse to write what would not load
    return entry


def day_names() -> tuple[str, ...]:
    return tuple(DAY_NAMES)


def holiday_names(specs: Sequence[str], start: date, end: date) -> list[tuple[date, str]]:
    """Public holidays of the ``CC``/``CC-SUB`` calendars in ``[start, end)``, with their names, for the
    editor's overlay (the schedule itself stays stopped on them whatever the grid says)."""
    import holidays  # large; only schedules with holidays need it

    found: dict[date, str] = {}
    years = list(range(start.year, end.year + 1))
    for spec in specs:
        country, _, sub = spec.partition("-")
        try:
            calendar = holidays.country_holidays(country, subdiv=sub or None, years=years)
        except (NotImplementedError, KeyError, ValueError):
            continue  # the config check already refused a bad calendar; never fail a page over it
        for day, name in calendar.items():
            if start <= day < end:
                found.setdefault(day, str(name))
    return sorted(found.items())
