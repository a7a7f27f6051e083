"""The one per-night and per-month formula (cost.rates, docs/cost.md "Per night and per month"): a rate
over the schedule's night (in progress or next, whole) and over the schedule's stopped hours in the 730
hours from now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.cost.rates import HOURS_PER_MONTH, money
from hyperpod_scheduler.schedule import resolve

OFFICE = resolve("Mon-Fri 08:00-20:00 UTC", {})  # weeknights of 12 h, the weekend one night of 60 h
TUESDAY_NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_a_night_is_the_schedules_next_stopped_stretch_whole() -> None:
    m = money(10.0, OFFICE, TUESDAY_NOON)
    assert m.night == (TUESDAY_NOON.replace(hour=20), TUESDAY_NOON.replace(day=2, hour=8))
    assert m.night_hours == pytest.approx(12.0) and m.per_night == pytest.approx(120.0)


def test_the_night_in_progress_counts_whole_so_per_night_does_not_shrink_as_it_goes() -> None:
    evening, small_hours = TUESDAY_NOON.replace(hour=21), TUESDAY_NOON.replace(day=2, hour=6)
    assert money(10.0, OFFICE, evening).per_night == money(10.0, OFFICE, small_hours).per_night == pytest.approx(120)


def test_a_weekend_is_one_night() -> None:
    friday_night = datetime(2026, 12, 4, 22, 0, tzinfo=UTC)
    assert money(1.0, OFFICE, friday_night).night_hours == pytest.approx(60.0)


def test_a_month_is_the_schedules_stopped_hours_in_730_hours() -> None:
    m = money(2.0, OFFICE, TUESDAY_NOON)
    # 730 h from Tuesday noon: 4 weeks (108 stopped hours each: 168 less 5 x 12 running) and 58 h more
    # (Tue 12:00 to Thu 22:00: Tuesday night 12 h, Wednesday night 12 h, Thursday 20:00-22:00 2 h).
    assert m.month_hours == pytest.approx(4 * 108 + 26)
    assert m.per_month == pytest.approx(2.0 * m.month_hours)  # type: ignore[operator]
    assert m.month_always == pytest.approx(2.0 * HOURS_PER_MONTH)


def test_without_a_schedule_only_the_whole_month_is_known() -> None:
    m = money(3.0, None, TUESDAY_NOON)
    assert (m.night, m.per_night, m.month_hours, m.per_month) == (None, None, None, None)
    assert m.month_always == pytest.approx(3.0 * 730)
    assert m.scale_to_month(10.0) is None


def test_an_unpriced_rate_has_no_money_but_still_its_hours() -> None:
    m = money(None, OFFICE, TUESDAY_NOON)
    assert (m.per_night, m.per_month, m.month_always) == (None, None, None)
    assert m.night_hours == pytest.approx(12.0) and m.month_hours


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 60 * 24 * 21), st.floats(0, 1000))
def test_month_hours_are_within_the_month_and_money_is_the_rate_times_hours(minutes: int, rate: float) -> None:
    now = TUESDAY_NOON + timedelta(minutes=minutes)
    m = money(rate, OFFICE, now)
    assert m.month_hours is not None and 0 <= m.month_hours <= HOURS_PER_MONTH
    assert m.per_month == pytest.approx(rate * m.month_hours)
    assert m.per_night == pytest.approx(rate * m.night_hours)
    assert m.night is not None and m.night[0] < m.night[1] and now < m.night[1]  # in progress, or next
