"""Each kind of term as running intervals over a span of epoch seconds."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from hyperpod_scheduler.schedule.clock import local_date, wall_instant
from hyperpod_scheduler.schedule.intervals import Interval
from hyperpod_scheduler.schedule.terms import AbsoluteRange, Window

# Instants a source's state may change within: None = never changes; (-inf, inf) = keeps recurring.
Span = tuple[float, float] | None
EVERYWHERE: Span = (-math.inf, math.inf)
DropStart = Callable[[int], bool]


class Source(Protocol):
    def intervals(self, lo: int, hi: int, drop: DropStart | None) -> list[Interval]:
        """Running intervals overlapping [lo, hi) (may overlap each other or stick out of the span).

        ``drop`` says whether an occurrence starting at that instant belongs to an excluded day.
        """

    def span(self) -> Span: ...

    def runs(self) -> bool:
        """Whether it ever runs (a source that never runs makes exclusions irrelevant)."""


@dataclass(frozen=True)
class WindowSource:
    windows: tuple[Window, ...]

    def intervals(self, lo: int, hi: int, drop: DropStart | None) -> list[Interval]:
        out: list[Interval] = []
        for window in self.windows:
            tz = window.tz
            assert tz is not None, "windows get their timezone before they become a source"
            _occurrences(window, tz, lo, hi, drop, out)
        return out

    def span(self) -> Span:
        return EVERYWHERE

    def runs(self) -> bool:
        return True


def _occurrences(window: Window, tz: ZoneInfo, lo: int, hi: int, drop: DropStart | None, out: list[Interval]) -> None:
    end = window.end + (1440 if window.overnight else 0)
    # An occurrence starts at most ~2 days (overnight + DST) before it can reach ``lo``.
    day = local_date(lo, tz) - timedelta(days=2)
    last = local_date(hi, tz)
    while day <= last:
        if day.weekday() in window.days:
            s = wall_instant(day, window.start, tz, last=False)
            e = wall_instant(day, end, tz, last=True)
            if s < e and e > lo and s < hi and not (drop and drop(s)):
                out.append((s, e))
        day += timedelta(days=1)


@dataclass(frozen=True)
class AbsoluteSource:
    ranges: tuple[AbsoluteRange, ...]

    def intervals(self, lo: int, hi: int, drop: DropStart | None) -> list[Interval]:
        return [(r.start, r.end) for r in self.ranges if r.start < hi and r.end > lo]

    def span(self) -> Span:
        if not self.ranges:
            return None
        return (min(r.start for r in self.ranges), max(r.end for r in self.ranges))

    def runs(self) -> bool:
        return bool(self.ranges)


@dataclass(frozen=True)
class AlwaysSource:
    def intervals(self, lo: int, hi: int, drop: DropStart | None) -> list[Interval]:
        return [(lo, hi)]

    def span(self) -> Span:
        return None

    def runs(self) -> bool:
        return True
