"""Small helpers shared by the schedule tests."""

from __future__ import annotations

from datetime import datetime, timedelta

from hyperpod_scheduler.schedule import Schedule, load_schedules, resolve


def at(text: str) -> datetime:
    """An aware instant from ISO text with an offset (tests always say which zone they mean)."""
    value = datetime.fromisoformat(text)
    assert value.tzinfo is not None, text
    return value


def named(**entry: object) -> Schedule:
    return load_schedules({"s": entry})["s"]


def running(expr_or_schedule: str | Schedule, when: str) -> bool:
    schedule = resolve(expr_or_schedule) if isinstance(expr_or_schedule, str) else expr_or_schedule
    return schedule.is_running(at(when))


SECOND = timedelta(seconds=1)
