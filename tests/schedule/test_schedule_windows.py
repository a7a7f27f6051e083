"""Table tests: what an inline expression says at an instant, and the transitions it lists."""

from __future__ import annotations

import pytest

from hyperpod_scheduler.schedule import resolve
from tests.schedule.helpers import SECOND, at, running

BERLIN_OFFICE = "Mon-Fri 08:00-19:00 Europe/Berlin"
NIGHTS = "Mon-Fri 22:00-06:00 UTC"

# 2026-11-30 is a Monday. Berlin: spring forward 2026-03-29 02:00->03:00 (01:00Z), fall back 2026-10-25
# 03:00->02:00 (01:00Z). New York: spring forward 2026-03-08 02:00->03:00 (07:00Z), fall back 2026-11-01
# 02:00->01:00 (06:00Z).
CASES = [
    # plain weekday window: start inclusive, end exclusive, local wall clock
    (BERLIN_OFFICE, "2026-11-30T08:00+01:00", True),
    (BERLIN_OFFICE, "2026-11-30T07:59:59+01:00", False),
    (BERLIN_OFFICE, "2026-11-30T18:59:59+01:00", True),
    (BERLIN_OFFICE, "2026-11-30T19:00+01:00", False),
    (BERLIN_OFFICE, "2026-12-05T12:00+01:00", False),  # Saturday
    (BERLIN_OFFICE, "2026-03-30T06:00Z", True),  # 08:00 CEST, the Monday after spring forward
    (BERLIN_OFFICE, "2026-03-30T05:59Z", False),
    # overnight windows belong to the day they start on
    (NIGHTS, "2026-12-04T23:00Z", True),  # Friday night
    (NIGHTS, "2026-12-05T05:59:59Z", True),  # ... until Saturday 06:00
    (NIGHTS, "2026-12-05T06:00Z", False),
    (NIGHTS, "2026-12-05T23:00Z", False),  # no Saturday night
    (NIGHTS, "2026-12-06T23:00Z", False),  # no Sunday night
    (NIGHTS, "2026-12-07T03:00Z", False),  # so Monday early morning is stopped
    (NIGHTS, "2026-12-07T22:00Z", True),
    (NIGHTS, "2026-12-08T02:00Z", True),
    ("Mon-Fri 22:00-00:00 UTC", "2026-12-04T23:59Z", True),  # 00:00 end = midnight after
    # day ranges that wrap past Sunday
    ("Fri-Mon 10:00-12:00 UTC", "2026-12-04T11:00Z", True),
    ("Fri-Mon 10:00-12:00 UTC", "2026-12-06T11:00Z", True),
    ("Fri-Mon 10:00-12:00 UTC", "2026-12-07T11:00Z", True),
    ("Fri-Mon 10:00-12:00 UTC", "2026-12-08T11:00Z", False),
    ("Fri-Mon 10:00-12:00 UTC", "2026-12-03T11:00Z", False),
    ("Sun-Thu 09:00-17:00 UTC", "2026-12-06T10:00Z", True),
    ("Sun-Thu 09:00-17:00 UTC", "2026-12-03T10:00Z", True),
    ("Sun-Thu 09:00-17:00 UTC", "2026-12-04T10:00Z", False),
    ("Sun-Thu 09:00-17:00 UTC", "2026-12-05T10:00Z", False),
    # 24:00 as an end
    ("Sat 18:00-24:00 UTC", "2026-12-05T23:59:59Z", True),
    ("Sat 18:00-24:00 UTC", "2026-12-06T00:00Z", False),
    ("Mon-Sun 00:00-24:00 UTC", "2026-12-06T00:00Z", True),
    # day lists, mixed with ranges, and several windows
    ("Mon,Wed,Fri 08:00-10:00 UTC", "2026-11-30T09:00Z", True),
    ("Mon,Wed,Fri 08:00-10:00 UTC", "2026-12-01T09:00Z", False),
    ("Mon,Wed,Fri 08:00-10:00 UTC", "2026-12-02T09:00Z", True),
    ("Mon,Wed,Fri 08:00-10:00 UTC", "2026-12-04T09:00Z", True),
    ("mon, wed-thu 08:00-10:00 UTC", "2026-12-03T09:00Z", True),
    ("mon, wed-thu 08:00-10:00 UTC", "2026-12-01T09:00Z", False),
    ("Mon-Fri 08:00-12:00 UTC, Sat 10:00-11:00 UTC", "2026-12-05T10:30Z", True),
    ("Mon-Fri 08:00-12:00 UTC, Sat 10:00-11:00 UTC", "2026-12-05T11:00Z", False),
    ("Mon-Fri 08:00-12:00 UTC, Sat 10:00-11:00 UTC", "2026-12-04T11:59Z", True),
    ("08:00-09:00 UTC", "2026-12-06T08:30Z", True),  # no days = every day
    ("Mon 09:00-10:00 Asia/Kolkata", "2026-11-30T03:30Z", True),  # +05:30
    # Berlin spring forward: a start inside the gap begins at the transition
    ("Sun 02:30-05:00 Europe/Berlin", "2026-03-29T00:59:59Z", False),
    ("Sun 02:30-05:00 Europe/Berlin", "2026-03-29T01:00Z", True),
    ("Sun 02:30-05:00 Europe/Berlin", "2026-03-29T05:00+02:00", False),
    ("Sun 02:10-02:50 Europe/Berlin", "2026-03-29T01:00Z", False),  # wholly skipped that day
    ("Sun 02:10-02:50 Europe/Berlin", "2026-04-05T02:20+02:00", True),  # but not the next week
    ("Sat 22:00-02:30 Europe/Berlin", "2026-03-29T00:59:59Z", True),  # an end in the gap ...
    ("Sat 22:00-02:30 Europe/Berlin", "2026-03-29T01:00Z", False),  # ... is the transition
    # Berlin fall back: a window covers both occurrences of a repeated wall time
    ("Sun 02:30-05:00 Europe/Berlin", "2026-10-25T00:29:59Z", False),
    ("Sun 02:30-05:00 Europe/Berlin", "2026-10-25T02:30+02:00", True),  # first 02:30 (00:30Z)
    ("Sun 02:30-05:00 Europe/Berlin", "2026-10-25T04:59+01:00", True),
    ("Sun 02:30-05:00 Europe/Berlin", "2026-10-25T05:00+01:00", False),
    ("Sun 00:00-02:30 Europe/Berlin", "2026-10-25T02:45+02:00", True),  # between the two 02:30s
    ("Sun 00:00-02:30 Europe/Berlin", "2026-10-25T02:15+01:00", True),
    ("Sun 00:00-02:30 Europe/Berlin", "2026-10-25T02:30+01:00", False),  # ends at the second 02:30
    # New York, both directions
    ("Sun 02:30-04:00 America/New_York", "2026-03-08T06:59:59Z", False),
    ("Sun 02:30-04:00 America/New_York", "2026-03-08T07:00Z", True),
    ("Sun 02:30-04:00 America/New_York", "2026-03-08T04:00-04:00", False),
    ("Sun 01:30-03:00 America/New_York", "2026-11-01T05:29:59Z", False),
    ("Sun 01:30-03:00 America/New_York", "2026-11-01T01:30-04:00", True),  # first 01:30 (EDT)
    ("Sun 00:00-01:30 America/New_York", "2026-11-01T01:45-04:00", True),
    ("Sun 00:00-01:30 America/New_York", "2026-11-01T01:15-05:00", True),  # second pass, EST
    ("Sun 00:00-01:30 America/New_York", "2026-11-01T01:30-05:00", False),
    # absolute ranges, alone and combined with windows
    ("2026-12-24T00:00+01:00-2026-12-27T00:00+01:00", "2026-12-23T22:59:59Z", False),
    ("2026-12-24T00:00+01:00-2026-12-27T00:00+01:00", "2026-12-23T23:00Z", True),
    ("2026-12-24T00:00+01:00-2026-12-27T00:00+01:00", "2026-12-26T22:59:59Z", True),
    ("2026-12-24T00:00+01:00-2026-12-27T00:00+01:00", "2026-12-26T23:00Z", False),
    ("2026-12-24T00:00Z/2026-12-25T00:00Z", "2026-12-24T12:00Z", True),
    ("2026-11-01T00:00-05:00-2026-11-02T00:00-05:00", "2026-11-01T04:59Z", False),
    ("2026-11-01T00:00-05:00-2026-11-02T00:00-05:00", "2026-11-01T05:00Z", True),
    (BERLIN_OFFICE + ", 2026-12-26T10:00+01:00-2026-12-26T12:00+01:00", "2026-12-26T11:00+01:00", True),
    (BERLIN_OFFICE + ", 2026-12-26T10:00+01:00-2026-12-26T12:00+01:00", "2026-12-26T12:00+01:00", False),
    (BERLIN_OFFICE + ", 2026-12-26T10:00+01:00-2026-12-26T12:00+01:00", "2026-12-28T09:00+01:00", True),
    # always and never
    ("always", "2026-12-06T03:00Z", True),
    ("ALWAYS", "1999-01-01T00:00Z", True),
    ("never", "2026-12-07T12:00Z", False),
    ("never, Mon 08:00-09:00 UTC", "2026-11-30T08:30Z", True),
]


@pytest.mark.parametrize(("expr", "when", "expected"), CASES)
def test_is_running(expr: str, when: str, expected: bool) -> None:
    assert running(expr, when) is expected


def _listed(expr: str, after: str, count: int) -> list[tuple[str, str]]:
    found = resolve(expr).next_transitions(at(after), count)
    return [(t.at.isoformat(), t.state) for t in found]


NEXT_CASES = [
    (
        NIGHTS,
        "2026-12-04T12:00Z",
        [
            ("2026-12-04T22:00:00+00:00", "running"),
            ("2026-12-05T06:00:00+00:00", "stopped"),
            ("2026-12-07T22:00:00+00:00", "running"),
            ("2026-12-08T06:00:00+00:00", "stopped"),
        ],
    ),
    (
        BERLIN_OFFICE,
        "2026-11-28T00:00Z",
        [("2026-11-30T07:00:00+00:00", "running"), ("2026-11-30T18:00:00+00:00", "stopped")],
    ),
    (
        # Weeks are compiled per UTC week starting Monday 00:00: a window across that edge is one run.
        "Sun 20:00-04:00 UTC",
        "2026-12-06T00:00Z",
        [("2026-12-06T20:00:00+00:00", "running"), ("2026-12-07T04:00:00+00:00", "stopped")],
    ),
    (
        # Touching windows join: no stop at 12:00.
        "Mon 08:00-12:00 UTC, Mon 12:00-14:00 UTC",
        "2026-11-30T00:00Z",
        [("2026-11-30T08:00:00+00:00", "running"), ("2026-11-30T14:00:00+00:00", "stopped")],
    ),
    (
        "Sun 02:30-05:00 Europe/Berlin",
        "2026-03-28T00:00Z",
        [("2026-03-29T01:00:00+00:00", "running"), ("2026-03-29T03:00:00+00:00", "stopped")],
    ),
    (
        "Sun 00:00-02:30 Europe/Berlin",
        "2026-10-24T00:00Z",
        [("2026-10-24T22:00:00+00:00", "running"), ("2026-10-25T01:30:00+00:00", "stopped")],
    ),
    (
        "2026-12-24T00:00+01:00-2026-12-27T00:00+01:00",
        "2026-01-01T00:00Z",
        [("2026-12-23T23:00:00+00:00", "running"), ("2026-12-26T23:00:00+00:00", "stopped")],
    ),
    ("2026-12-24T00:00+01:00-2026-12-27T00:00+01:00", "2026-12-27T00:00Z", []),
    ("always", "2026-01-01T00:00Z", []),
    ("never", "2026-01-01T00:00Z", []),
    ("Mon-Sun 00:00-24:00 UTC", "2026-01-01T00:00Z", []),
]


@pytest.mark.parametrize(("expr", "after", "expected"), NEXT_CASES)
def test_next_transitions(expr: str, after: str, expected: list[tuple[str, str]]) -> None:
    assert _listed(expr, after, len(expected) or 4) == expected


def test_transitions_between_is_half_open_and_crosses_weeks() -> None:
    schedule = resolve(NIGHTS)
    found = schedule.transitions(at("2026-12-04T22:00Z"), at("2026-12-08T06:00Z"))
    assert [(t.at.isoformat(), t.state) for t in found] == [
        ("2026-12-04T22:00:00+00:00", "running"),
        ("2026-12-05T06:00:00+00:00", "stopped"),
        ("2026-12-07T22:00:00+00:00", "running"),
    ]


def test_last_transition_is_at_or_before() -> None:
    schedule = resolve(BERLIN_OFFICE)
    friday_stop = at("2026-12-04T18:00Z")
    last = schedule.last_transition(at("2026-12-05T12:00Z"))
    assert last is not None and (last.at, last.state) == (friday_stop, "stopped")
    exact = schedule.last_transition(friday_stop)
    assert exact is not None and exact.at == friday_stop
    before = schedule.last_transition(friday_stop - SECOND)
    assert before is not None and (before.at, before.state) == (at("2026-12-04T07:00Z"), "running")


def test_last_transition_of_a_constant_schedule_is_none() -> None:
    assert resolve("always").last_transition(at("2026-12-05T12:00Z")) is None
    assert resolve("2030-01-01T00:00Z-2030-01-02T00:00Z").last_transition(at("2026-12-05T12:00Z")) is None


def test_results_are_utc_and_accept_any_offset() -> None:
    schedule = resolve(BERLIN_OFFICE)
    first = schedule.next_transitions(at("2026-11-30T00:00-08:00"), 1)[0]
    assert first.at.utcoffset() is not None and first.at.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    assert schedule.state_at(at("2026-11-30T09:00+01:00")) == "running"
