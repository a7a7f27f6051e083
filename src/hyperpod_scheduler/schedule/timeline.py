"""A compiled schedule: running intervals per UTC week, computed lazily and cached, so a lookup is a
binary search and the list of transitions is read off interval edges instead of scanning minutes."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal
from zoneinfo import ZoneInfo

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule.calendar import Exclusions, HolidayCalendar
from hyperpod_scheduler.schedule.clock import EARLIEST as _EARLIEST
from hyperpod_scheduler.schedule.clock import LATEST as _LATEST
from hyperpod_scheduler.schedule.clock import epoch, from_epoch
from hyperpod_scheduler.schedule.intervals import merge, subtract
from hyperpod_scheduler.schedule.sources import Source, Span

State = Literal["running", "stopped"]
Mode = Literal["both", "stop-only", "start-only"]
WEEK = 7 * 86400
_MONDAY = 4 * 86400  # 1970-01-05T00:00Z, a Monday: periods are UTC weeks starting Monday 00:00
HORIZON_WEEKS = 8 * 53  # how far next/last search before concluding that nothing changes
_CACHE_PERIODS = 1024  # compiled weeks kept per schedule (oldest first out): about twenty years


@dataclass(frozen=True, order=True)
class Transition:
    """The schedule's desired state changes to ``state`` at ``at`` (aware, UTC)."""

    at: datetime
    state: State


@dataclass(frozen=True)
class _Period:
    starts: list[int]
    ends: list[int]
    # starts and ends interleaved, sorted: running iff an odd number are <= t. Floats, as the instants
    # looked up are (a float against an int compares slower); epoch seconds are exact in a float.
    edges: list[float]


class Schedule:
    """When a cluster should be running. Build one with :func:`resolve` or :func:`load_schedules`.

    Every method takes aware datetimes (naive ones raise UsageError) and returns UTC datetimes.
    """

    def __init__(
        self,
        sources: Sequence[Source],
        *,
        timezone: ZoneInfo,
        exclusions: Exclusions | None = None,
        name: str | None = None,
        expression: str = "",
        mode: Mode = "both",
        ready_by: bool = False,
        timezone_conflict: str | None = None,
    ) -> None:
        self.sources = tuple(sources)
        self.timezone = timezone
        self.exclusions = exclusions if exclusions else None
        self.name = name
        self.expression = expression
        self.mode: Mode = mode
        self.ready_by = ready_by
        self._timezone_conflict = timezone_conflict
        self._cache: OrderedDict[int, _Period] = OrderedDict()
        self._edges: dict[float, list[float]] = {}  # the same weeks' edges, keyed for is_running's lookup
        self._changes_cache: OrderedDict[int, list[tuple[int, bool]]] = OrderedDict()
        # The last few spans asked for: a fleet page asks every cluster under this schedule the same
        # week ahead (issue 30), and each answer is the same frozen transitions.
        self._spans: dict[tuple[float, float], tuple[Transition, ...]] = {}  # plain dict: ticks share it in threads
        self._span = self._change_span()

    def __repr__(self) -> str:
        label = f"{self.name!r}: " if self.name else ""
        return f"Schedule({label}{self.expression!r}, tz={self.timezone.key}, mode={self.mode})"

    # -- queries -------------------------------------------------------------------------------------

    def is_running(self, at: datetime) -> bool:
        """Whether the cluster should be running at ``at`` (window starts inclusive, ends exclusive)."""
        # The hot path of every tick and face (issue 30: >= 20x Instance Scheduler's evaluation): an
        # aware UTC instant skips epoch()'s general checks, and a compiled week is one flat list of
        # edges (start, end, start, end, ...), so the state is the parity of one binary search.
        # _running_by_definition is the same answer the long way; a property test holds them equal.
        try:
            if at.tzinfo is UTC:
                t = at.timestamp()
                # only weeks wholly inside the supported years are in _edges: a hit needs no range check
                edges = self._edges.get((t - _MONDAY) // WEEK)
                if edges is not None:
                    return bisect_right(edges, t) & 1 == 1
        except AttributeError:
            pass  # not a datetime: epoch() says so
        t = epoch(at)
        k = math.floor((t - _MONDAY) / WEEK)
        return bisect_right(self._period(k).edges, t) & 1 == 1

    def _running_by_definition(self, at: datetime) -> bool:
        """``is_running`` without the caches or the flat edges: the week compiled anew, each interval tried."""
        t = epoch(at)
        k = math.floor((t - _MONDAY) / WEEK)
        return any(s <= t < e for s, e in self._compile(k))

    def state_at(self, at: datetime) -> State:
        return "running" if self.is_running(at) else "stopped"

    def allows(self, action: Literal["start", "stop"]) -> bool:
        """Whether the scheduler may take ``action`` under this schedule's mode."""
        if action not in ("start", "stop"):
            raise ValueError(f"action must be 'start' or 'stop', got {action!r}")
        return self.mode == "both" or self.mode == f"{action}-only"

    def transitions(self, start: datetime, end: datetime) -> list[Transition]:
        """Every transition with ``start <= at < end``, in order."""
        lo, hi = epoch(start), epoch(end)
        held = self._spans.get((lo, hi))
        if held is not None:
            return list(held)
        found: list[tuple[int, bool]] = []
        for k in range(self._index(lo), self._index(hi) + 1):
            found.extend(t for t in self._changes(k) if lo <= t[0] < hi)
        out = tuple(_transition(t) for t in found)
        if len(self._spans) >= 8:
            self._spans = {}  # a handful of spans are asked for again and again; the rest once
        self._spans[(lo, hi)] = out
        return list(out)

    def next_transitions(self, after: datetime, count: int = 1) -> list[Transition]:
        """The next ``count`` transitions strictly after ``after`` (fewer if the schedule stops changing;
        the search gives up after about eight years without a change)."""
        t = epoch(after)
        found: list[tuple[int, bool]] = []
        if count <= 0 or self._span is None or t >= self._span[1]:
            return []
        first = self._index(max(t, self._span[0]))
        last = min(first + HORIZON_WEEKS, self._index(min(self._span[1], 4e11)))
        for k in range(first, last + 1):
            found.extend(c for c in self._changes(k) if c[0] > t)
            if len(found) >= count:
                break
        return [_transition(c) for c in found[:count]]

    def next_transition(self, after: datetime) -> Transition | None:
        found = self.next_transitions(after, 1)
        return found[0] if found else None

    def last_transition(self, before: datetime) -> Transition | None:
        """The most recent transition at or before ``before``, or None within about eight years."""
        t = epoch(before)
        if self._span is None or t < self._span[0]:
            return None
        first = self._index(min(t, self._span[1]))
        last = max(first - HORIZON_WEEKS, self._index(max(self._span[0], -4e11)))
        for k in range(first, last - 1, -1):
            earlier = [c for c in self._changes(k) if c[0] <= t]
            if earlier:
                return _transition(earlier[-1])
        return None

    # -- variants -------------------------------------------------------------------------------------

    def with_holidays(self, calendars: Sequence[HolidayCalendar]) -> Schedule:
        """The same schedule, also stopped on these calendars' holidays (local days in its timezone)."""
        if not calendars:
            return self
        if self._timezone_conflict:
            raise UsageError(self._timezone_conflict)
        base = self.exclusions or Exclusions(self.timezone)
        return Schedule(
            self.sources,
            timezone=self.timezone,
            exclusions=base.with_calendars(calendars),
            name=self.name,
            expression=self.expression,
            mode=self.mode,
            ready_by=self.ready_by,
        )

    # -- compilation ----------------------------------------------------------------------------------

    def _change_span(self) -> Span:
        spans = [s.span() for s in self.sources]
        if self.exclusions and any(s.runs() for s in self.sources):
            spans.append(self.exclusions.span())
        real = [s for s in spans if s is not None]
        if not real:
            return None
        return (min(s[0] for s in real), max(s[1] for s in real))

    @staticmethod
    def _index(t: float) -> int:
        return math.floor((t - _MONDAY) / WEEK)

    def _period(self, k: int) -> _Period:
        cached = self._cache.get(k)
        if cached is not None:
            return cached
        merged = self._compile(k)
        period = _Period([s for s, _ in merged], [e for _, e in merged], [float(t) for iv in merged for t in iv])
        self._cache[k] = period
        if _EARLIEST <= _MONDAY + k * WEEK < _MONDAY + (k + 1) * WEEK <= _LATEST:
            self._edges[float(k)] = period.edges
        if len(self._cache) > _CACHE_PERIODS:
            gone, _ = self._cache.popitem(last=False)
            self._edges.pop(float(gone), None)
        return period

    def _compile(self, k: int) -> list[tuple[int, int]]:
        """Week ``k``'s running intervals, merged and sorted, holidays and skip dates taken out."""
        lo = _MONDAY + k * WEEK
        hi = lo + WEEK
        drop = self.exclusions if self.exclusions else None
        raw = [iv for source in self.sources for iv in source.intervals(lo, hi, drop)]
        merged = merge(raw, lo, hi)
        if self.exclusions and merged:
            merged = subtract(merged, self.exclusions.intervals(lo, hi))
        return merged

    def _changes(self, k: int) -> list[tuple[int, bool]]:
        """State changes inside period ``k`` as (instant, running), joined across period edges."""
        cached = self._changes_cache.get(k)
        if cached is not None:
            return cached
        lo = _MONDAY + k * WEEK
        hi = lo + WEEK
        before = self._period(k - 1)
        running = bool(before.ends) and before.ends[-1] == lo
        changes = list(_edges(self._period(k), lo, hi, running))
        self._changes_cache[k] = changes
        if len(self._changes_cache) > _CACHE_PERIODS:
            self._changes_cache.popitem(last=False)
        return changes


def _edges(period: _Period, lo: int, hi: int, running: bool) -> Iterator[tuple[int, bool]]:
    for s, e in zip(period.starts, period.ends, strict=True):
        if s > lo or not running:
            if running:  # running into the period but the first interval starts later
                yield lo, False
            yield s, True
        running = True
        if e < hi:
            yield e, False
            running = False
    if running and not period.starts:
        yield lo, False


def _transition(change: tuple[int, bool]) -> Transition:
    return Transition(from_epoch(change[0]), "running" if change[1] else "stopped")
