"""Every kind of bad input fails with a UsageError naming the bad token (the CLI exits 2 with it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule import load_schedules, resolve

EXPRESSION_ERRORS = [
    ("Mnn-Fri 08:00-19:00 UTC", "unknown day 'Mnn'"),
    ("Mon-Tue-Wed 08:00-19:00 UTC", "bad day range 'Mon-Tue-Wed'"),
    ("Mon-Fri 8-19 UTC", "bad time range '8-19'"),
    ("Mon-Fri 25:00-19:00 UTC", "bad start time '25:00'"),
    ("Mon-Fri 08:00-24:30 UTC", "bad end time '24:30'"),
    ("Mon-Fri 08:60-19:00 UTC", "bad start time '08:60'"),
    ("Mon-Fri 08:00-08:00 UTC", "empty time range '08:00-08:00'"),
    ("Mon-Fri 08:00-19:00 Europe/Berln", "unknown timezone 'Europe/Berln'"),
    ("Mon-Fri 08:00-19:00 ../../etc/passwd", "unknown timezone '../../etc/passwd'"),
    # Files of the zone database, not zones: "localtime" is the host's own zone (it moved with the machine).
    ("Mon-Fri 08:00-19:00 localtime", "timezone 'localtime' is a file of the zone database"),
    ("Mon-Fri 08:00-19:00 Factory", "timezone 'Factory' is a file of the zone database"),
    ("Mon-Fri 08:00-19:00 posixrules", "timezone 'posixrules' is a file of the zone database"),
    ("Mon-Fri 08:00-19:00 right/UTC", "timezone 'right/UTC' is a file of the zone database"),
    ("Mon-Fri 08:00-19:00 UTC extra", "unexpected 'extra'"),
    ("Mon Wed 08:00-19:00 UTC", "bad time range 'Wed'"),
    ("Mon,Wed", "days 'Mon,Wed' have no time range"),
    ("Mon-Fri 08:00-19:00 UTC,,Sat 10:00-11:00 UTC", "empty term between commas"),
    ("Mon-Fri 08:00-19:00 UTC,", "empty term between commas"),
    ("   ", "give an expression"),
    ("Mon-Fri 08:00-19:00", "window 'Mon-Fri 08:00-19:00' names no timezone"),
    (
        "2026-12-24T00:00-2026-12-27T00:00",
        "'2026-12-24T00:00' in '2026-12-24T00:00-2026-12-27T00:00' has no UTC offset",
    ),
    ("2026-13-24T00:00+01:00-2026-12-27T00:00+01:00", "bad date-time '2026-13-24T00:00+01:00'"),
    ("2026-12-27T00:00+01:00-2026-12-24T00:00+01:00", "ends before it starts"),
    ("2026-12-24", "bad absolute range '2026-12-24'"),
    ("sometimes", "unknown day 'sometimes'"),
    ("Mon, always", "days 'Mon' have no time range"),
]


@pytest.mark.parametrize(("expr", "message"), EXPRESSION_ERRORS)
def test_bad_expression_names_the_token(expr: str, message: str) -> None:
    with pytest.raises(UsageError, match=_literal(message)):
        resolve(expr)


def test_a_bad_name_says_it_is_not_a_known_schedule_either() -> None:
    with pytest.raises(UsageError, match="nor is it a named schedule \\(known: office\\)"):
        resolve("offce", load_schedules({"office": "always"}))


def test_bad_holiday_code_is_named() -> None:
    with pytest.raises(UsageError, match="holidays 'XX-YY'"):
        resolve("always", holidays=["XX-YY"])
    with pytest.raises(UsageError, match="holidays 'US-ZZ'"):
        resolve("always", holidays=["US-ZZ"])


def test_naive_datetimes_are_refused() -> None:
    schedule = resolve("always")
    with pytest.raises(UsageError, match="naive datetime 2026-11-30T08:00:00"):
        schedule.is_running(datetime(2026, 11, 30, 8, 0))
    with pytest.raises(UsageError, match="naive datetime"):
        schedule.next_transitions(datetime(2026, 11, 30, 8, 0), 2)


def test_instants_outside_the_supported_years_and_non_datetimes_are_refused_on_the_fast_path() -> None:
    # is_running's UTC shortcut skips epoch()'s checks on a cached week: the weeks holding the bounds
    # are never cached for it, so the last supported second runs and the next is still refused.
    schedule = resolve("always")
    last = datetime(9000, 1, 1, tzinfo=UTC)
    assert schedule.is_running(last) and schedule.is_running(last - timedelta(days=3))
    with pytest.raises(UsageError, match="outside the supported years 1900 to 9000"):
        schedule.is_running(last + timedelta(seconds=1))
    with pytest.raises(UsageError, match="outside the supported years"):
        schedule.is_running(datetime(1899, 12, 31, 23, 59, tzinfo=UTC))
    with pytest.raises(UsageError, match="expected a datetime, got str"):
        schedule.is_running("2026-11-30T08:00Z")  # type: ignore[arg-type]


NAMED_ERRORS: list[tuple[Any, str]] = [
    ({"office": {"windws": "always"}}, "schedule 'office': windws: Extra inputs are not permitted"),
    ({"office": {"windows": "always", "mode": "sometimes"}}, "schedule 'office': mode: Input should be"),
    ({"office": {"windows": "always", "mode": "sometimes"}}, "(got 'sometimes')"),
    ({"office": {"windows": "always", "skip_dates": ["2026-13-01"]}}, "skip_dates.0: "),
    ({"office": {"windows": "always", "skip_dates": ["2026-13-01"]}}, "(got '2026-13-01')"),
    ({"office": {"windows": "always", "ready_by": "perhaps"}}, "schedule 'office': ready_by: "),
    ({"office": {"windows": ["always", "Mon 08:00-09:0 UTC"]}}, "schedule 'office': windows[1]: "),
    ({"office": {"windows": ["Mon 08:00-09:0 UTC"]}}, "bad time range '08:00-09:0'"),
    ({"office": {"windows": "always", "start": "0 8 * * *"}}, "schedule 'office': give either windows or start/stop"),
    ({"office": {"timezone": "UTC"}}, "give windows"),
    ({"office": {"start": "0 8 * * *", "timezone": "UTC"}}, "needs both start and stop"),
    ({"office": {"start": "0 8 * * *", "stop": "0 19 * * *"}}, "timezone: required with start/stop"),
    ({"office": {"start": "0 25 * * *", "stop": "0 19 * * *", "timezone": "UTC"}}, "start[0]: "),
    ({"office": {"start": "0 25 * * *", "stop": "0 19 * * *", "timezone": "UTC"}}, "'0 25 * * *'"),
    ({"office": {"start": "0 8 * * *", "stop": "0 0 * * * *", "timezone": "UTC"}}, "stop[0]: "),
    ({"office": {"start": "0 8 * * *", "stop": "@daily", "timezone": "UTC"}}, "not a five-field"),
    ({"office": {"start": "0 0 31 2 *", "stop": "0 8 * * *", "timezone": "UTC"}}, "never fires"),
    ({"office": {"windows": "always", "timezone": "Mars/Olympus"}}, "unknown timezone 'Mars/Olympus'"),
    ({"office": {"windows": "always", "holidays": "XX"}}, "schedule 'office': holidays 'XX'"),
    (
        {"office": {"windows": "Mon 08:00-09:00 UTC, Tue 08:00-09:00 Asia/Tokyo", "skip_dates": ["2026-12-24"]}},
        "several timezones (Asia/Tokyo, UTC): set the schedule's timezone",
    ),
    ({"office": 42}, "schedule 'office': expected a mapping or an expression string, got int"),
    (["office"], "schedules: expected a mapping"),
    ({"": "always"}, "schedule names must be non-empty text"),
]


@pytest.mark.parametrize(("mapping", "message"), NAMED_ERRORS)
def test_bad_named_schedule_names_schedule_field_and_value(mapping: Any, message: str) -> None:
    with pytest.raises(UsageError, match=_literal(message)):
        load_schedules(mapping)


def test_mixed_timezones_without_exclusions_are_fine() -> None:
    schedules = load_schedules({"o": {"windows": "Mon 08:00-09:00 UTC, Tue 08:00-09:00 Asia/Tokyo"}})
    assert schedules["o"].timezone.key == "UTC"


def _literal(text: str) -> str:
    import re

    return re.escape(text)
