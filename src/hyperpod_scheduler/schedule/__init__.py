"""Schedules: parse, compile to transition instants, evaluate. Pure functions; the clock is passed in.

Layers: ``grammar`` and ``cron`` parse text into ``terms``; ``build`` applies defaults and makes a
``timeline.Schedule``, which expands ``sources`` into running intervals per UTC week (``clock`` holds the
DST rules, ``calendar`` the excluded days) and answers lookups by binary search. ``named`` loads the
config's ``schedules:`` section; ``resolve`` is the entry point for the CLI and the engine.
"""

from hyperpod_scheduler.schedule.named import ScheduleEntry, load_schedules
from hyperpod_scheduler.schedule.resolve import resolve
from hyperpod_scheduler.schedule.timeline import Mode, Schedule, State, Transition

__all__ = ["Mode", "Schedule", "ScheduleEntry", "State", "Transition", "load_schedules", "resolve"]
