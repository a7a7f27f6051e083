"""Money over time from a rate: the one formula behind every "per night", "tonight" and "per month" a
face shows (docs/cost.md, "Per night and per month").

A rate (USD an hour: what a group bills, what a stop avoids, what FSx costs) becomes money over the
schedule's stopped hours, counted from ``now`` (the clock is passed in):

- **a night** is the schedule's stopped stretch in progress at ``now``, else the next one, whole (from
  its stop to the start that ends it; a weekend is one night). A stretch with no start within a week
  ends a week after ``now``. ``per_night = rate × night hours``.
- **a month** is the 730 hours from ``now`` (AWS bills GB-month prices over a 730-hour month).
  ``per_month = rate × the schedule's stopped hours in that month``: what the rate comes to while the
  schedule keeps the cluster stopped. ``month_always = rate × 730``: a rate that bills stopped or not
  (FSx storage) over the whole month.

Without a schedule (a cluster no schedule governs) there is no night and no stopped month: those
figures are None, and ``month_always`` still holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hyperpod_scheduler.schedule import Schedule

HOURS_PER_MONTH = 730.0
MONTH = timedelta(hours=HOURS_PER_MONTH)
WEEK = timedelta(days=7)


@dataclass(frozen=True)
class Money:
    """One rate over a night and a month of one schedule, from one instant."""

    usd_per_hour: float | None
    night: tuple[datetime, datetime] | None  # the night in progress or the next one (stop, start)
    night_hours: float
    per_night: float | None  # rate × night hours (None: no rate, or no night)
    month_hours: float | None  # the schedule's stopped hours in the 730 hours from now (None: no schedule)
    per_month: float | None  # rate × month_hours
    month_always: float | None  # rate × 730: what a rate that bills stopped or not comes to a month

    def scale_to_month(self, stopped_hours: float) -> float | None:
        """The factor that projects figures observed over ``stopped_hours`` of stops to this month's
        stopped hours (a saving per stopped hour, times the month's stopped hours); None without a
        schedule, 0 with nothing observed."""
        if self.month_hours is None:
            return None
        return self.month_hours / stopped_hours if stopped_hours > 0 else 0.0


def _night(schedule: Schedule, now: datetime) -> tuple[datetime, datetime] | None:
    ahead = schedule.transitions(now, now + WEEK + WEEK)
    if not schedule.is_running(now):
        last = schedule.last_transition(now)
        begin = last.at if last is not None and last.at >= now - WEEK else now
        end = next((t.at for t in ahead if t.state == "running" and t.at > now), now + WEEK)
        return begin, min(end, now + WEEK)
    begin_at = next((t.at for t in ahead if t.state == "stopped" and t.at >= now), None)
    if begin_at is None or begin_at > now + WEEK:
        return None
    end = next((t.at for t in ahead if t.state == "running" and t.at > begin_at), begin_at + WEEK)
    return begin_at, min(end, begin_at + WEEK)


def _stopped_hours(schedule: Schedule, lo: datetime, hi: datetime) -> float:
    stopped = not schedule.is_running(lo)
    cursor, total = lo, 0.0
    for t in schedule.transitions(lo, hi):
        if stopped:
            total += (t.at - cursor).total_seconds()
        cursor, stopped = t.at, t.state == "stopped"
    if stopped:
        total += (hi - cursor).total_seconds()
    return total / 3600


def money(usd_per_hour: float | None, schedule: Schedule | None, now: datetime) -> Money:
    """``usd_per_hour`` over the schedule's night and month from ``now`` (see the module doc)."""
    rate = usd_per_hour
    always = None if rate is None else rate * HOURS_PER_MONTH
    if schedule is None:
        return Money(rate, None, 0.0, None, None, None, always)
    night = _night(schedule, now)
    hours = (night[1] - night[0]).total_seconds() / 3600 if night is not None else 0.0
    month = _stopped_hours(schedule, now, now + MONTH)
    return Money(
        usd_per_hour=rate,
        night=night,
        night_hours=hours,
        per_night=None if rate is None or night is None else rate * hours,
        month_hours=month,
        per_month=None if rate is None else rate * month,
        month_always=always,
    )


__all__ = ["HOURS_PER_MONTH", "Money", "money"]
