"""Find the schedule an expression or name means: the entry point for the CLI and the engine."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule.build import build_schedule
from hyperpod_scheduler.schedule.calendar import holiday_calendar
from hyperpod_scheduler.schedule.grammar import parse_expression
from hyperpod_scheduler.schedule.timeline import Schedule


def resolve(
    expr_or_name: str,
    schedules: Mapping[str, Schedule] | None = None,
    *,
    holidays: Sequence[str] = (),
) -> Schedule:
    """The named schedule if ``schedules`` has that name, else the inline expression parsed.

    ``holidays`` (``CC`` or ``CC-SUB``) adds public holidays on which the schedule stays stopped.
    """
    if not isinstance(expr_or_name, str) or not expr_or_name.strip():
        raise UsageError("schedule: give an expression (e.g. 'Mon-Fri 08:00-19:00 UTC') or a schedule name")
    text = expr_or_name.strip()
    named = (schedules or {}).get(text)
    if named is not None:
        return named.with_holidays([holiday_calendar(spec) for spec in holidays]) if holidays else named
    try:
        return _inline(text, tuple(holidays))
    except UsageError as exc:
        if not _looks_like_name(text):
            raise
        known = ", ".join(sorted(schedules)) if schedules else "none configured"
        raise UsageError(f"{exc}; nor is it a named schedule (known: {known})") from None


@lru_cache(maxsize=512)
def _inline(text: str, holidays: tuple[str, ...]) -> Schedule:
    # Cached: the engine resolves the same few expressions for every cluster on every tick, and a shared
    # Schedule keeps its compiled weeks, so later lookups are binary searches only.
    calendars = [holiday_calendar(spec) for spec in holidays]
    return build_schedule(parse_expression(text), expression=text).with_holidays(calendars)


def _looks_like_name(text: str) -> bool:
    return " " not in text and ":" not in text and text.lower() not in ("always", "never")
