"""A week compiled from the windows' merged weekly pattern equals the definition, occurrence by occurrence
(issue 28, item 14: 300 windows covering the week took ``next`` 23 s; now the pattern is merged once)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.schedule.intervals import merge
from hyperpod_scheduler.schedule.sources import WindowSource
from tests.schedule.test_schedule_properties import windows

WEEK = 7 * 86400
MONDAY = 4 * 86400


@settings(max_examples=200, deadline=None)
@given(st.lists(windows(), min_size=1, max_size=6), st.integers(2600, 3300))
def test_merged_weeks_equal_each_occurrence(terms: list[str], week: int) -> None:
    schedule = resolve(", ".join(terms))
    (source,) = [s for s in schedule.sources if isinstance(s, WindowSource)]
    lo = MONDAY + week * WEEK
    hi = lo + WEEK
    assert merge(source.intervals(lo, hi, None), lo, hi) == merge(source.each_occurrence(lo, hi, None), lo, hi)


def test_windows_covering_every_week_answer_next_without_compiling_window_by_window() -> None:
    # 200 windows (the bound), every hour of every day: nothing ever changes, so next searches eight years of weeks.
    expr = ", ".join(f"{h % 24:02d}:00-{h % 24 + 1:02d}:00 Europe/Berlin" for h in range(200))
    schedule = resolve(expr)
    at = datetime(2026, 12, 2, 12, tzinfo=UTC)
    assert schedule.is_running(at) and schedule.next_transitions(at, 3) == []
    assert schedule.last_transition(at) is None
