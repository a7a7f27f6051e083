"""Instants and wall-clock times: every DST rule of the schedule package lives here.

Instants are integer (or, for queries, float) seconds since the Unix epoch, so interval lookups are plain
number comparisons. A wall-clock time maps to an instant by one of two rules:

- ``first`` (used for window starts, day starts and cron firings): the first instant at which the local
  clock reads that time; if the time is skipped by a spring-forward gap, the instant of the gap.
- ``last`` (used for window ends): the last instant at which the local clock reads that time, so a
  window ending inside a repeated (fall-back) hour runs through both occurrences; a skipped end also maps
  to the instant of the gap.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hyperpod_scheduler.errors import UsageError

MINUTES_PER_DAY = 1440
_EPOCH = datetime(1970, 1, 1)
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC).timestamp()  # the supported instants (epoch() says so)
LATEST = datetime(9000, 1, 1, tzinfo=UTC).timestamp()
_ZONE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*$")


def zone(name: str) -> ZoneInfo:
    """The IANA zone called ``name``; a UsageError naming it if there is no such zone."""
    return _zone(name)


# Files of the zone database that are not zones a schedule can mean: "localtime" is whatever zone the
# host running the scheduler is set to (a schedule that moves with the machine), "Factory" a placeholder
# ("-00"), "posixrules" a template; "posix/..." and "right/..." are copies (the latter counting leap seconds).
_NOT_ZONES = frozenset({"localtime", "factory", "posixrules"})
_NOT_ZONE_PREFIXES = ("posix/", "right/")


@lru_cache(maxsize=512)
def _zone(name: str) -> ZoneInfo:
    if name.lower() in _NOT_ZONES or name.lower().startswith(_NOT_ZONE_PREFIXES):
        raise UsageError(
            f"timezone '{name}' is a file of the zone database, not a zone a schedule can mean "
            "(expected an IANA name such as Europe/Berlin or UTC)"
        )
    if not _ZONE_NAME.match(name):
        raise UsageError(f"unknown timezone '{name}' (expected an IANA name such as Europe/Berlin or UTC)")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise UsageError(f"unknown timezone '{name}' (expected an IANA name such as Europe/Berlin or UTC)") from None


def epoch(at: datetime) -> float:
    """Seconds since the epoch of an aware datetime. Naive datetimes are refused: their zone is a guess."""
    try:
        tz = at.tzinfo
        # the fast path matters: this runs on every lookup
        if tz is UTC or (tz is not None and at.utcoffset() is not None):
            seconds = at.timestamp()
            if EARLIEST <= seconds <= LATEST:
                return seconds
            raise UsageError(f"instant {at.isoformat()} is outside the supported years 1900 to 9000")
    except AttributeError:
        raise UsageError(f"expected a datetime, got {type(at).__name__} {at!r}") from None
    raise UsageError(f"naive datetime {at.isoformat()}: pass a timezone-aware datetime (for example tzinfo=UTC)")


def from_epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


# Remembered: the schedule's weekly and daily walks map the same few wall-clock times of the same weeks
# again and again (each cached period reaches ten days back, and a sparse schedule walks years ahead), and
# the two ZoneInfo look-ups of each mapping were most of a schedule's evaluation time. A pure function of
# its arguments (ZoneInfo objects are immutable), so remembering it changes no answer.
@lru_cache(maxsize=1 << 16)
def wall_instant(day: date, minutes: int, tz: ZoneInfo, *, last: bool) -> int:
    """The instant at which the clock in ``tz`` reads ``minutes`` past midnight of ``day``.

    ``minutes`` may reach 1440 or beyond (24:00, overnight ends): it rolls into the following days.
    ``last`` picks the second occurrence of a repeated time; skipped times map to the gap's instant.
    """
    if minutes >= MINUTES_PER_DAY:
        day = day + timedelta(days=minutes // MINUTES_PER_DAY)
        minutes %= MINUTES_PER_DAY
    naive = datetime(day.year, day.month, day.day, minutes // 60, minutes % 60)
    return naive_instant(naive, tz, last=last)


def naive_instant(naive: datetime, tz: ZoneInfo, *, last: bool) -> int:
    """Like :func:`wall_instant` for a naive local datetime (whole seconds)."""
    base = (naive - _EPOCH) // timedelta(seconds=1)
    early = naive.replace(tzinfo=tz).utcoffset()
    late = naive.replace(tzinfo=tz, fold=1).utcoffset()
    assert early is not None and late is not None
    first = base - int(early.total_seconds())
    second = base - int(late.total_seconds())
    if first == second:
        return first
    if early > late:  # fall back: the wall time happens twice, fold=0 is the earlier instant
        return second if last else first
    # spring forward: the wall time never happens; the gap lies in (second, first]
    return _offset_change(second, first, tz)


def _offset_change(lo: int, hi: int, tz: ZoneInfo) -> int:
    """Smallest instant in (lo, hi] whose UTC offset equals the offset at ``hi`` (binary search)."""
    target = datetime.fromtimestamp(hi, tz).utcoffset()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, tz).utcoffset() == target:
            hi = mid
        else:
            lo = mid
    return hi


def local_date(seconds: float, tz: ZoneInfo) -> date:
    return datetime.fromtimestamp(seconds, tz).date()


def local_naive(seconds: float, tz: ZoneInfo) -> datetime:
    """The local wall-clock reading at an instant, as a naive datetime."""
    return datetime.fromtimestamp(seconds, tz).replace(tzinfo=None)
