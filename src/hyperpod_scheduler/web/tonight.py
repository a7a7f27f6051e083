"""What a cluster bills in its coming stopped stretch (tonight, or the weekend), and why."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hyperpod_scheduler.app.actions import kept_why
from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.app.status import StatusRow
from hyperpod_scheduler.app.wording import clock, count_of, when
from hyperpod_scheduler.cost.rates import money
from hyperpod_scheduler.engine.fleet import Governed
from hyperpod_scheduler.engine.stop_forecast import StopForecast
from hyperpod_scheduler.schedule import Schedule
from hyperpod_scheduler.web.core import WEEK


def tonight(
    ctx: Context, g: Governed | None, r: StatusRow, forecast: StopForecast | Exception | None
) -> dict[str, Any]:
    """What this cluster bills in its coming stopped stretch (tonight, or the weekend), and why.
    ``forecast``: what the schedule's stop sends (``DashboardCore.stop_forecast``), None if not governed."""
    now = ctx.now()
    if g is None:
        hourly = r.usd_per_hour
        why = "not governed: no schedule stops it" if r.state != "stopped" else "stopped by hand"
        return {"bills": bool(hourly), "usd": None, "usd_per_hour": hourly, "why": why, "from": None, "to": None}
    schedule = g.schedule
    stretch = money(None, schedule, now).night  # the night in progress or the next one, whole (cost.rates)
    zone = g.schedule.timezone
    if r.hold is not None and r.hold.state == "running":
        hourly = r.usd_per_hour
        until = f" until {when(r.hold.until, zone)}" if r.hold.until else " until released"
        return _bill(schedule, now, hourly, f"held running by {r.hold.by}{until}: everything bills")
    if stretch is None or forecast is None:
        return _bill(schedule, now, r.usd_per_hour, "the schedule does not stop it in the coming week")
    begin, end = stretch
    kept, why = kept_tonight(ctx, r, forecast)
    if not isinstance(forecast, Exception) and forecast.outcome in ("blocked", "refused"):
        # The planner or a guard would send no stop at all: everything bills, and the page says why.
        return _bill(schedule, now, r.usd_per_hour, f"a stop would not go out: {forecast.reason}")
    blocked = next((f for f in r.flags if f.kind == "blocked"), None)
    if blocked is not None and r.state == "running" and not g.schedule.is_running(now):
        return _bill(schedule, now, r.usd_per_hour, f"still running: {blocked.text}")
    if begin <= now and r.state in ("running", "starting") and not any(f.kind == "kept" for f in r.flags):
        # Off its window and up (a Start now, a stop that did not go out): tonight follows the
        # cluster, not the schedule; it bills until something stops it.
        ahead = g.schedule.transitions(now, now + WEEK)
        stop_at = next((t.at for t in ahead if t.state == "stopped"), None)
        nxt = f"the schedule's next stop {clock(stop_at, zone)}" if stop_at else "no scheduled stop this week"
        return _bill(schedule, now, r.usd_per_hour, f"{r.state} outside its window: bills until stopped ({nxt})")
    if not kept:
        stops = "stopped now" if begin <= now else f"stops {clock(begin, zone)}"
        return _bill(schedule, now, 0.0, f"{stops}; nothing but storage bills until {clock(end, zone)}")
    hourly = sum(k["usd_per_hour"] or 0.0 for k in kept)
    groups = ", ".join(count_of(k["count"], k["instance_type"]) for k in kept)
    return {**_bill(schedule, now, hourly, f"{groups} kept: {why}"), "kept": kept}


def kept_tonight(ctx: Context, r: StatusRow, forecast: StopForecast | Exception) -> tuple[list[dict[str, Any]], str]:
    """The groups the schedule's stop keeps and why: what the planner and the guards would send
    (``app.actions.stop_forecast``), else (the cluster cannot be described) what the last stop kept."""
    if isinstance(forecast, Exception):
        kept = [
            {"group": b.group, "count": b.count, "instance_type": b.instance_type, "usd_per_hour": b.usd_per_hour}
            for b in r.billing
        ]
        return kept, "as the last stop kept them (cannot describe the cluster now)"
    prices = ctx.prices()
    kept = []
    for k in forecast.kept:
        price = prices.instance(k.instance_type) if k.instance_type else None
        kept.append(
            {
                "group": k.group,
                "count": k.after,
                "instance_type": k.instance_type,
                "usd_per_hour": None if price is None else round(price.usd * k.after, 2),
                "reason": k.why,
                "kept_by": k.kept_by,
            }
        )
    if forecast.outcome == "busy":  # changing now: its groups' targets are where the update leaves them
        return kept, f"at the targets of the update in progress ({forecast.reason})"
    return kept, kept_why(forecast)


def _bill(schedule: Schedule, now: datetime, hourly: float | None, why: str) -> dict[str, Any]:
    """What ``hourly`` comes to over the schedule's night (``cost.rates.money``: the formula of every
    per-night figure, so this and ``status``'s kept cost per night are one figure)."""
    m = money(hourly, schedule, now)
    night = m.night
    total = None if hourly is None else round(m.per_night or 0.0, 2)
    return {
        "bills": bool(hourly),
        "usd_per_hour": None if hourly is None else round(hourly, 2),
        "usd": total,
        "hours": round(m.night_hours, 1),
        "from": night[0].isoformat() if night else None,
        "to": night[1].isoformat() if night else None,
        "why": why,
    }
