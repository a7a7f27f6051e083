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
from datetime import datetime, timedelta
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
        from croniter import CroniterBadDateError, croniter

        since = local_naive(lo, self.tz) - timedelta(days=1)
        for rule in self.rules:
            it = croniter(rule.expr, since)
            while True:
                try:
                    wall = it.get_next(datetime)
                except CroniterBadDateError:
                    break
                at = naive_instant(wall, self.tz, last=False)
                if at >= hi:
                    break
                if at >= lo and not (rule.action == "start" and drop and drop(at)):
                    yield at, wall, _PRIORITY[rule.action], rule.action

    def _running_before(self, lo: int, drop: DropStart | None) -> bool:
        """The action of the latest effective firing strictly before ``lo``."""
        offset_now = _offset(lo, self.tz)
        fold_slack = max(timedelta(0), _offset(lo - 86400, self.tz) - offset_now)
        from croniter import CroniterBadDateError, croniter

        until = local_naive(lo, self.tz) + fold_slack + timedelta(minutes=1)
        latest: Firing | None = None
        for rule in self.rules:
            it = croniter(rule.expr, until)
            for _ in range(_MAX_STEPS_BACK):
                try:
                    wall = it.get_prev(datetime)
                except CroniterBadDateError:
                    break
                at = naive_instant(wall, self.tz, last=False)
                if at >= lo or (rule.action == "start" and drop and drop(at)):
                    continue
                candidate: Firing = (at, wall, _PRIORITY[rule.action], rule.action)
                if latest is None or candidate > latest:
                    latest = candidate
                break
        return latest is not None and latest[3] == "start"


def _offset(at: int, tz: ZoneInfo) -> timedelta:
    offset = datetime.fromtimestamp(at, tz).utcoffset()
    return offset if offset is not None else timedelta(0)
