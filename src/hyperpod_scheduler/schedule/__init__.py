"""Schedules: parse, compile to transition instants, evaluate. Pure functions; the clock is passed in.

Layers: ``grammar`` and ``cron`` parse text into ``terms``; ``build`` applies defaults and makes a
``timeline.Schedule``, which expands ``sources`` into running intervals per UTC week (``clock`` holds the
DST rules, ``calendar`` the excluded days) and answers lookups by binary search. ``named`` loads the
config's ``schedules:`` section; ``resolve`` is the entry point for the CLI and the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hyperpod_scheduler.schedule.resolve import resolve
from hyperpod_scheduler.schedule.timeline import Mode, Schedule, State, Transition

if TYPE_CHECKING:
    from hyperpod_scheduler.schedule.named import ScheduleEntry, load_schedules


def __getattr__(name: str) -> Any:
    # ``named`` builds pydantic models for the config's section: an inline expression (`schedule check
    # 'Mon-Fri ...'` from cron) never needs them, so they are imported when first asked for.
    if name in ("ScheduleEntry", "load_schedules"):
        from hyperpod_scheduler.schedule import named

        return getattr(named, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Mode", "Schedule", "ScheduleEntry", "State", "Transition", "load_schedules", "resolve"]
