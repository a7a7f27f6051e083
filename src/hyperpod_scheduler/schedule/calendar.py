"""Local dates on which a schedule stays stopped: skip dates and public holidays."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule.clock import local_date, wall_instant
from hyperpod_scheduler.schedule.intervals import Interval, merge


@dataclass(frozen=True)
class HolidayCalendar:
    """Public holidays of a country and optional subdivision, from the ``holidays`` library."""

    country: str
    subdivision: str | None

    @property
    def spec(self) -> str:
        return self.country + (f"-{self.subdivision}" if self.subdivision else "")

    def __contains__(self, day: date) -> bool:
        return day in _holiday_dates(self.country, self.subdivision, day.year)


def holiday_calendar(spec: str) -> HolidayCalendar:
    """``US``, ``US-CA``, ``DE-BY``: country code, then optionally '-' and a subdivision code."""
    if not isinstance(spec, str) or not spec.strip():
        raise UsageError(f"holidays: expected CC or CC-SUB (e.g. US-CA), got '{spec}'")
    country, _, subdivision = spec.strip().partition("-")
    calendar = HolidayCalendar(country.upper(), subdivision.upper() or None)
    try:
        _holiday_dates(calendar.country, calendar.subdivision, 2026)
    except (NotImplementedError, KeyError, ValueError, AttributeError) as exc:
        raise UsageError(f"holidays '{spec}': {exc}") from None
    return calendar


@lru_cache(maxsize=1024)
def _holiday_dates(country: str, subdivision: str | None, year: int) -> frozenset[date]:
    import holidays  # imported late: it is large and only holiday schedules need it

    return frozenset(holidays.country_holidays(country, subdiv=subdivision, years=year).keys())


@dataclass(frozen=True)
class Exclusions:
    """Whole local days (in ``tz``) on which the schedule is stopped."""

    tz: ZoneInfo
    skip_dates: frozenset[date] = frozenset()
    calendars: tuple[HolidayCalendar, ...] = field(default=())

    def __bool__(self) -> bool:
        return bool(self.skip_dates or self.calendars)

    def excludes(self, day: date) -> bool:
        return day in self.skip_dates or any(day in cal for cal in self.calendars)

    def __call__(self, at: int) -> bool:
        """Whether an occurrence starting at instant ``at`` starts on an excluded local day."""
        return self.excludes(local_date(at, self.tz))

    def any_between(self, lo: float, hi: float) -> bool:
        """Whether a local day from the one holding ``lo`` to the one holding ``hi`` is excluded."""
        day, last = local_date(lo, self.tz), local_date(hi, self.tz)
        while day <= last:
            if self.excludes(day):
                return True
            day += timedelta(days=1)
        return False

    def span(self) -> tuple[float, float]:
        """Where excluded days can change the timeline: everywhere once holidays recur every year."""
        if self.calendars or not self.skip_dates:
            return (-math.inf, math.inf) if self.calendars else (math.inf, -math.inf)
        first, last = min(self.skip_dates), max(self.skip_dates)
        return (
            wall_instant(first, 0, self.tz, last=False),
            wall_instant(last + timedelta(days=1), 0, self.tz, last=False),
        )

    def with_calendars(self, extra: Iterable[HolidayCalendar]) -> Exclusions:
        return Exclusions(self.tz, self.skip_dates, (*self.calendars, *extra))

    def intervals(self, lo: int, hi: int) -> list[Interval]:
        """The excluded local days overlapping [lo, hi), each from its midnight to the next."""
        first, last = local_date(lo, self.tz), local_date(hi, self.tz)
        found = []
        day = first - timedelta(days=1)
        while day <= last:
            if self.excludes(day):
                found.append((wall_instant(day, 0, self.tz, last=False), wall_instant(day, 1440, self.tz, last=False)))
            day += timedelta(days=1)
        return merge(found, lo, hi)
