"""How every face writes times, durations and money for people: one place, so the CLI, the dashboard
and the shared report never disagree (no microseconds, no ``$-130.57``, a timezone on every time)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, tzinfo


def when(at: datetime, zone: tzinfo | None = None, *, year: bool = False) -> str:
    """``Tue 1 Dec 22:00 UTC`` (in ``zone``, default UTC); minutes are the finest a person needs."""
    local = at.astimezone(zone or UTC)
    abbrev = local.tzname() or "UTC"
    day = f"{local:%a} {local.day} {local:%b}" + (f" {local.year}" if year else "")
    return f"{day} {local:%H:%M} {abbrev}"


def when_seen_at(at: datetime, seen: datetime, zone: tzinfo | None = None) -> str:
    """``when(at)``, with the year when it is not ``seen``'s (a hold until 2999 read "Tue 1 Jan")."""
    z = zone or UTC
    return when(at, zone, year=at.astimezone(z).year != seen.astimezone(z).year)


def clock(at: datetime, zone: tzinfo | None = None) -> str:
    """``Tue 22:00 UTC``: a time within the coming week."""
    local = at.astimezone(zone or UTC)
    return f"{local:%a %H:%M} {local.tzname() or 'UTC'}"


def iso_minute(at: datetime) -> str:
    """``2026-12-01T22:00Z``: machine-readable and still short (tables piped into other tools)."""
    utc = at.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M}Z"


def duration(seconds: float | None) -> str:
    """``45 s``, ``10 min``, ``1 h 20 min``, ``2 d 3 h``; empty for None."""
    if seconds is None:
        return ""
    s = max(round(seconds), 0)
    if s < 60:
        return f"{s} s"
    minutes = s // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    days, hours = divmod(hours, 24)
    return f"{days} d" + (f" {hours} h" if hours else "")


def countdown(delta: timedelta) -> str:
    """``in 5 h 20 min`` or ``2 min ago``."""
    seconds = delta.total_seconds()
    if abs(seconds) < 60:
        return "now"
    text = duration(abs(seconds))
    return f"in {text}" if seconds > 0 else f"{text} ago"


def usd(value: float | None, *, cents: bool = True, up_to: bool = False) -> str:
    """``$1,234.57``; a negative figure reads ``−$130.57``; None (no price) reads ``-``, and so does a
    figure that is not a number (prices are checked where they enter; this keeps ``$inf`` off a page).
    ``up_to``: the figure is an upper bound (a flexible group priced at its dearest type,
    ``cost.prices.GroupPrice``) and reads ``up to $1,234.57``."""
    if value is None or not math.isfinite(value):
        return "-"
    shown = f"${abs(value):,.2f}" if cents else f"${abs(value):,.0f}"
    shown = ("\u2212" + shown) if value < 0 and shown.strip("$0.,") else shown
    return f"up to {shown}" if up_to else shown


def hours(value: float) -> str:
    """``1,234.5`` hours; a figure under a tenth that is not zero keeps two significant digits
    (``0.013``): a saving in cents beside "0.0 node-hours avoided" would read as a contradiction."""
    if not math.isfinite(value):
        return "-"
    if value and abs(value) < 0.1:
        return f"{value:.2g}" if abs(value) >= 0.001 else f"{value:.1e}"
    return f"{value:,.1f}"


def count_of(count: int, instance_type: str | None) -> str:
    """``4 × p5.48xlarge`` (the ``ml.`` prefix says nothing a person needs)."""
    kind = (instance_type or "nodes").removeprefix("ml.")
    return f"{count} \u00d7 {kind}"


__all__ = ["clock", "count_of", "countdown", "duration", "hours", "iso_minute", "usd", "when"]
