"""Named schedules: holidays, skip dates, modes, the cron form, and the ready_by passthrough."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hyperpod_scheduler.schedule import Schedule, load_schedules, resolve
from tests.schedule.helpers import at, named, running

LA_OFFICE = named(windows="Mon-Fri 08:00-19:00", timezone="America/Los_Angeles", holidays="US-CA")
LA_EVERY_DAY = named(windows=["Mon-Sun 08:00-19:00 America/Los_Angeles"], holidays=["US-CA"])
LA_NIGHTS = named(windows="Mon-Fri 22:00-06:00 America/Los_Angeles", holidays="US-CA")
BAVARIA = named(windows="Mon-Fri 08:00-19:00 Europe/Berlin", holidays="DE-BY")
BERLIN_STATE = named(windows="Mon-Fri 08:00-19:00 Europe/Berlin", holidays="DE-BE")
SKIPPING = named(windows="Mon-Fri 08:00-19:00", timezone="Europe/Berlin", skip_dates=["2026-12-31"])

CASES = [
    (LA_OFFICE, "2026-12-24T10:00-08:00", True),
    (LA_OFFICE, "2026-12-25T10:00-08:00", False),  # Christmas, a Friday
    (LA_OFFICE, "2026-12-28T10:00-08:00", True),
    (LA_EVERY_DAY, "2026-07-04T10:00-07:00", False),  # Independence Day (a Saturday)
    (LA_EVERY_DAY, "2026-07-03T10:00-07:00", False),  # ... observed on Friday
    (LA_EVERY_DAY, "2026-07-05T10:00-07:00", True),
    (LA_NIGHTS, "2026-12-24T23:00-08:00", True),  # Thursday night, before the holiday
    (LA_NIGHTS, "2026-12-25T01:00-08:00", False),  # the holiday is stopped all day ...
    (LA_NIGHTS, "2026-12-25T23:00-08:00", False),  # ... and its own night window is dropped
    (LA_NIGHTS, "2026-12-26T03:00-08:00", False),
    (LA_NIGHTS, "2026-12-28T23:00-08:00", True),
    (BAVARIA, "2026-01-06T10:00+01:00", False),  # Epiphany: a holiday in Bavaria ...
    (BERLIN_STATE, "2026-01-06T10:00+01:00", True),  # ... but not in Berlin
    (BAVARIA, "2026-06-04T10:00+02:00", False),  # Corpus Christi
    (BAVARIA, "2026-06-03T10:00+02:00", True),
    (SKIPPING, "2026-12-31T10:00+01:00", False),
    (SKIPPING, "2026-12-30T10:00+01:00", True),
]


@pytest.mark.parametrize(("schedule", "when", "expected"), CASES)
def test_named_is_running(schedule: Schedule, when: str, expected: bool) -> None:
    assert schedule.is_running(at(when)) is expected


def test_cesar_chavez_day_is_californian() -> None:
    us_only = named(windows=["Mon-Sun 08:00-19:00 America/Los_Angeles"], holidays=["US"])
    assert not LA_EVERY_DAY.is_running(at("2026-03-31T10:00-07:00"))
    assert us_only.is_running(at("2026-03-31T10:00-07:00"))


def test_holiday_transitions_skip_the_day() -> None:
    found = LA_OFFICE.next_transitions(at("2026-12-24T12:00-08:00"), 3)
    assert [(t.at.isoformat(), t.state) for t in found] == [
        ("2026-12-25T03:00:00+00:00", "stopped"),  # 19:00 Thursday
        ("2026-12-28T16:00:00+00:00", "running"),  # 08:00 Monday
        ("2026-12-29T03:00:00+00:00", "stopped"),
    ]


def test_cli_style_holidays_on_an_inline_expression() -> None:
    schedule = resolve("Mon-Fri 08:00-19:00 America/Los_Angeles", holidays=["US-CA"])
    assert not schedule.is_running(at("2026-12-25T10:00-08:00"))
    assert resolve("Mon-Fri 08:00-19:00 America/Los_Angeles").is_running(at("2026-12-25T10:00-08:00"))


def test_holidays_on_a_named_schedule_add_to_its_own() -> None:
    schedules = {"office": SKIPPING}
    both = resolve("office", schedules, holidays=["DE-BY"])
    assert not both.is_running(at("2026-12-31T10:00+01:00"))
    assert not both.is_running(at("2026-01-06T10:00+01:00"))
    assert resolve("office", schedules) is SKIPPING


@pytest.mark.parametrize(
    ("mode", "start", "stop"),
    [("both", True, True), ("stop-only", False, True), ("start-only", True, False)],
)
def test_mode_says_which_actions_are_allowed(mode: str, start: bool, stop: bool) -> None:
    schedule = named(windows="Mon-Fri 08:00-19:00 UTC", mode=mode)
    assert (schedule.allows("start"), schedule.allows("stop"), schedule.mode) == (start, stop, mode)
    assert schedule.is_running(at("2026-11-30T09:00Z"))  # the mode limits actions, not the timeline


def test_inline_schedules_allow_both_and_ready_by_passes_through() -> None:
    assert resolve("always").allows("start") and resolve("always").allows("stop")
    assert named(windows="always", ready_by=True).ready_by is True
    assert named(windows="always").ready_by is False


def test_shorthand_string_entry_and_names() -> None:
    schedules = load_schedules({"office": "Mon-Fri 08:00-19:00 Europe/Berlin", "late": {"windows": "always"}})
    assert set(schedules) == {"office", "late"}
    assert schedules["office"].name == "office"
    assert running(resolve("office", schedules), "2026-11-30T09:00+01:00")
    assert load_schedules(None) == {}


# The cron form agrees with the equivalent window form, including across DST in both directions.
CRON_PAIRS = [
    (
        {"start": "0 8 * * 1-5", "stop": "0 19 * * 1-5", "timezone": "Europe/Berlin"},
        "Mon-Fri 08:00-19:00 Europe/Berlin",
    ),
    (
        {"start": ["0 22 * * 1-5"], "stop": ["0 6 * * 2-6"], "timezone": "UTC"},
        "Mon-Fri 22:00-06:00 UTC",
    ),
    (
        {"start": "30 2 * * 0", "stop": "0 5 * * 0", "timezone": "Europe/Berlin"},
        "Sun 02:30-05:00 Europe/Berlin",
    ),
    (
        {"start": "0 9 * * 1,3", "stop": ["0 12 * * 1", "0 17 * * 3"], "timezone": "America/New_York"},
        "Mon 09:00-12:00 America/New_York, Wed 09:00-17:00 America/New_York",
    ),
]


@pytest.mark.parametrize(("cron", "window"), CRON_PAIRS)
@pytest.mark.parametrize("since", ["2026-03-01T00:00Z", "2026-10-15T00:00Z", "2026-11-25T00:00Z"])
def test_cron_form_agrees_with_window_form(cron: dict[str, object], window: str, since: str) -> None:
    by_cron = named(**cron)
    by_window = resolve(window)
    start = at(since)
    assert by_cron.next_transitions(start, 30) == by_window.next_transitions(start, 30)
    for hours in range(0, 24 * 40, 7):
        instant = start + timedelta(hours=hours, minutes=13)
        assert by_cron.is_running(instant) == by_window.is_running(instant), instant


def test_cron_latest_entry_wins_and_stop_beats_start_at_the_same_minute() -> None:
    tie = named(start="0 8 * * *", stop="0 8 * * *", timezone="UTC")
    assert not tie.is_running(at("2026-11-30T08:00Z"))
    assert tie.next_transitions(at("2026-11-30T00:00Z"), 1) == []
    weekly = named(start="0 8 * * 1", stop="0 8 * * 5", timezone="UTC")  # Monday to Friday, continuously
    assert weekly.is_running(at("2026-12-02T03:00Z"))
    assert not weekly.is_running(at("2026-12-05T03:00Z"))


def test_cron_start_on_a_holiday_has_no_effect() -> None:
    schedule = named(start="0 8 * * 1-5", stop="0 19 * * 1-5", timezone="America/Los_Angeles", holidays="US-CA")
    assert not schedule.is_running(at("2026-12-25T10:00-08:00"))
    assert schedule.is_running(at("2026-12-28T10:00-08:00"))
