"""Turn parsed terms and options into a :class:`Schedule` (the one place defaults are applied)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import date

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule.calendar import Exclusions, holiday_calendar
from hyperpod_scheduler.schedule.clock import zone
from hyperpod_scheduler.schedule.sources import AbsoluteSource, AlwaysSource, Source, WindowSource
from hyperpod_scheduler.schedule.terms import AbsoluteRange, Always, CronRule, Term, Window
from hyperpod_scheduler.schedule.timeline import Mode, Schedule

# Bounds on one schedule (docs/reliability.md): far above any office's hours, below what made `status`
# take 30 s (3,000 windows) before weeks were merged.
MAX_WINDOWS = 200  # weekly windows
MAX_RANGES = 1_000  # absolute ranges
MAX_CRON = 100  # start and stop entries together
MAX_SKIP_DATES = 1_000
MAX_HOLIDAYS = 20  # holiday calendars


def _bounded(
    terms: Sequence[Term], cron: Sequence[CronRule], skip_dates: Sequence[date], holidays: Sequence[str]
) -> None:
    counts = (
        ("windows", sum(isinstance(t, Window) for t in terms), MAX_WINDOWS, "weekly windows"),
        ("windows", sum(isinstance(t, AbsoluteRange) for t in terms), MAX_RANGES, "absolute ranges"),
        ("start/stop", len(cron), MAX_CRON, "cron entries"),
        ("skip_dates", len(skip_dates), MAX_SKIP_DATES, "dates"),
        ("holidays", len(holidays), MAX_HOLIDAYS, "calendars"),
    )
    for field, count, most, what in counts:
        if count > most:
            raise UsageError(f"{field}: {count:,} {what}; a schedule may have at most {most:,}")


def build_schedule(
    terms: Sequence[Term] = (),
    *,
    cron: Sequence[CronRule] = (),
    timezone: str | None = None,
    skip_dates: Iterable[date] = (),
    holidays: Sequence[str] = (),
    mode: Mode = "both",
    ready_by: bool = False,
    name: str | None = None,
    expression: str = "",
) -> Schedule:
    dates = tuple(skip_dates)
    _bounded(terms, cron, dates, holidays)
    default = zone(timezone) if timezone else None
    windows = []
    for term in terms:
        if isinstance(term, Window):
            if term.tz is None and default is None:
                raise UsageError(
                    f"window '{term.text}' names no timezone (end it with one, e.g. "
                    f"'{term.text} Europe/Berlin', or set the schedule's timezone)"
                )
            windows.append(term if term.tz is not None else replace(term, tz=default))
    named = sorted({w.tz.key for w in windows if w.tz is not None})
    conflict = None
    if default is not None:
        tz = default
    elif len(named) == 1:
        tz = zone(named[0])
    else:
        tz = zone("UTC")
        if len(named) > 1:
            conflict = (
                f"windows use several timezones ({', '.join(named)}): set the schedule's timezone "
                "to say which local day holidays and skip dates mean"
            )
    if cron and default is None:
        raise UsageError("timezone: required with start/stop cron entries (e.g. timezone: Europe/Berlin)")

    sources: list[Source] = []
    if windows:
        sources.append(WindowSource(tuple(windows)))
    ranges = tuple(t for t in terms if isinstance(t, AbsoluteRange))
    if ranges:
        sources.append(AbsoluteSource(ranges))
    if any(isinstance(t, Always) for t in terms):
        sources.append(AlwaysSource())
    if cron:
        from hyperpod_scheduler.schedule.cron import CronSource  # the cron form's module, for it only

        sources.append(CronSource(tuple(cron), tz))

    calendars = tuple(holiday_calendar(spec) for spec in holidays)
    exclusions = Exclusions(tz, frozenset(dates), calendars)
    if exclusions and conflict:
        raise UsageError(conflict)
    return Schedule(
        sources,
        timezone=tz,
        exclusions=exclusions,
        name=name,
        expression=expression,
        mode=mode,
        ready_by=ready_by,
        timezone_conflict=conflict,
    )
