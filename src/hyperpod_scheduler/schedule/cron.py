"""The cron form: ``start``/``stop`` entries as five-field cron expressions in the schedule's timezone.

The desired state at an instant is the action of the latest entry that fired at or before it (stopped if
none ever fired). Firings are computed on the naive local wall clock (croniter never sees a timezone, so
it cannot get DST wrong) and mapped to instants by the ``first`` rule of :mod:`clock`: a firing inside a
spring-forward gap happens at the gap, one in a repeated hour happens at its first occurrence. When a
start and a stop fire at the same instant, the stop wins. A start that fires on an excluded local day
(skip date or holiday) has no effect.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule.clock import local_naive, naive_instant
from hyperpod_scheduler.schedule.intervals import Interval
from hyperpod_scheduler.schedule.sources import EVERYWHERE, DropStart, Span
from hyperpod_scheduler.schedule.terms import Action, CronRule

_MAX_STEPS_BACK = 5000
_PRIORITY = {"start": 0, "stop": 1}  # sorted last wins: stop beats start at the same instant
Firing = tuple[int, datetime, int, Action]


def parse_cron(expr: str, action: Action) -> CronRule:
    """A validated rule; UsageError naming the expression if it is not five fields or never fires."""
    if not isinstance(expr, str) or len(expr.split()) != 5:
        raise UsageError(f"{action}: '{expr}' is not a five-field cron expression (e.g. '0 8 * * 1-5')")
    text = " ".join(expr.split())
    # croniter (and dateutil under it) is imported by the cron form only: most schedules are windows,
    # and a cron `schedule check` of one should not pay for it.
    from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter

    try:
        if not croniter.is_valid(text):
            raise UsageError(f"{action}: invalid cron expression '{expr}'")
        croniter(text, datetime(2000, 1, 1)).get_next(datetime)
    except (CroniterBadDateError, CroniterBadCronError, CroniterError, ValueError, KeyError):
        raise UsageError(f"{action}: cron expression '{expr}' never fires") from None
    return CronRule(text, action)


@dataclass(frozen=True)
class CronSource:
    rules: tuple[CronRule, ...]
    tz: ZoneInfo

    def span(self) -> Span:
        return EVERYWHERE

    def runs(self) -> bool:
        return any(rule.action == "start" for rule in self.rules)

    def intervals(self, lo: int, hi: int, drop: DropStart | None) -> list[Interval]:
        running_since: int | None = lo if self._running_before(lo, drop) else None
        out: list[Interval] = []
        for at, _wall, _prio, action in sorted(self._firings(lo, hi, drop)):
            if action == "start" and running_since is None:
                running_since = at
            elif action == "stop" and running_since is not None:
                out.append((running_since, at))
                running_since = None
        if running_since is not None:
            out.append((running_since, hi))
        return out

    def _firings(self, lo: int, hi: int, drop: DropStart | None) -> Iterator[Firing]:
        # Wall readings near a fall-back hour can map before ``lo``: start a day early and filter.
        since = local_naive(lo, self.tz) - timedelta(days=1)
        for rule in self.rules:
            for wall in walls_after(rule.expr, since):
                at = naive_instant(wall, self.tz, last=False)
                if at >= hi:
                    break
                if at >= lo and not (rule.action == "start" and drop and drop(at)):
                    yield at, wall, _PRIORITY[rule.action], rule.action

    def _running_before(self, lo: int, drop: DropStart | None) -> bool:
        """The action of the latest effective firing strictly before ``lo``."""
        offset_now = _offset(lo, self.tz)
        fold_slack = max(timedelta(0), _offset(lo - 86400, self.tz) - offset_now)
        until = local_naive(lo, self.tz) + fold_slack + timedelta(minutes=1)
        latest: Firing | None = None
        for rule in self.rules:
            for steps, wall in enumerate(walls_before(rule.expr, until)):
                if steps >= _MAX_STEPS_BACK:
                    break
                at = naive_instant(wall, self.tz, last=False)
                if at >= lo or (rule.action == "start" and drop and drop(at)):
                    continue
                candidate: Firing = (at, wall, _PRIORITY[rule.action], rule.action)
                if latest is None or candidate > latest:
                    latest = candidate
                break
        return latest is not None and latest[3] == "start"


# Every week of a cron schedule is compiled from its firings, and croniter takes a quarter of a
# millisecond per firing (dateutil arithmetic per step): a schedule that never changes searches eight
# years of weeks, so the firings of the common form (any day of the month, any month: "M H * * DOW")
# are listed directly, day by day, from croniter's own expansion of the fields. Every other form (a day
# of the month, a month, "#", "L") goes through croniter step by step. A property test holds the two
# equal on every expression it draws.
_Fields = tuple[tuple[int, ...], tuple[int, ...], frozenset[int]]


@lru_cache(maxsize=256)
def _daily_fields(expr: str) -> _Fields | None:
    """(minutes, hours, ISO weekdays 1-7) of an expression whose days are chosen by weekday alone."""
    from croniter import croniter

    it = croniter(expr, datetime(2000, 1, 1))
    minutes, hours, dom, month, dow = it.expanded[:5]
    if len(it.expanded) != 5 or dom != ["*"] or month != ["*"] or it.nth_weekday_of_month:
        return None
    full = (
        tuple(range(60)) if minutes == ["*"] else tuple(sorted(int(m) for m in minutes)),
        tuple(range(24)) if hours == ["*"] else tuple(sorted(int(h) for h in hours)),
        frozenset(range(1, 8)) if dow == ["*"] else frozenset(int(d) % 7 or 7 for d in dow),
    )
    return full


def walls_after(expr: str, since: datetime) -> Iterator[datetime]:
    """The wall-clock readings at which ``expr`` fires strictly after ``since``, in order (croniter's get_next)."""
    fields = _daily_fields(expr)
    if fields is None:
        yield from _croniter_walls(expr, since, forward=True)
    else:
        yield from _daily_walls(fields, since, forward=True)


def walls_before(expr: str, until: datetime) -> Iterator[datetime]:
    """The readings at which ``expr`` fires strictly before ``until``, latest first (croniter's get_prev)."""
    fields = _daily_fields(expr)
    if fields is None:
        yield from _croniter_walls(expr, until, forward=False)
    else:
        yield from _daily_walls(fields, until, forward=False)


def _daily_walls(fields: _Fields, start: datetime, forward: bool) -> Iterator[datetime]:
    """A daily form's firings day by day from ``start`` (strictly after it, or strictly before it going back)."""
    minutes, hours, weekdays = fields
    if not forward:
        minutes, hours = minutes[::-1], hours[::-1]
    step, last = (timedelta(days=1), date.max) if forward else (timedelta(days=-1), date.min)
    day: date = start.date()
    while True:
        if day.isoweekday() in weekdays:
            for h in hours:
                for m in minutes:
                    wall = datetime(day.year, day.month, day.day, h, m)
                    if (wall > start) if forward else (wall < start):
                        yield wall
        if day == last:
            return
        day += step


def _croniter_walls(expr: str, start: datetime, *, forward: bool) -> Iterator[datetime]:
    from croniter import CroniterBadDateError, croniter

    it = croniter(expr, start)
    while True:
        try:
            yield it.get_next(datetime) if forward else it.get_prev(datetime)
        except CroniterBadDateError:
            return


def _offset(at: int, tz: ZoneInfo) -> timedelta:
    offset = datetime.fromtimestamp(at, tz).utcoffset()
    return offset if offset is not None else timedelta(0)
