"""What a parsed schedule is made of: plain values, no parsing and no evaluation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from zoneinfo import ZoneInfo

DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
Action = Literal["start", "stop"]


@dataclass(frozen=True)
class Window:
    """Runs on each listed weekday (0 = Monday) from ``start`` to ``end`` minutes past local midnight.

    ``end`` is at most 1440 (24:00); an ``end`` not after ``start`` means the window runs overnight into
    the next day and belongs to the day it starts on. ``tz`` is None until a schedule supplies a default.
    """

    days: frozenset[int]
    start: int
    end: int
    tz: ZoneInfo | None
    text: str

    @property
    def overnight(self) -> bool:
        return self.end <= self.start


@dataclass(frozen=True)
class AbsoluteRange:
    """Runs from ``start`` (inclusive) to ``end`` (exclusive), epoch seconds."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Always:
    text: str = "always"


@dataclass(frozen=True)
class Never:
    text: str = "never"


Term = Window | AbsoluteRange | Always | Never


@dataclass(frozen=True)
class CronRule:
    """A five-field cron expression whose firing sets the desired state (start = running)."""

    expr: str
    action: Action
