"""What a cluster bills in its coming stopped stretch (tonight, or the weekend), and why."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hyperpod_scheduler.app.actions import kept_why
from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.app.looks import NotLookedAt
from hyperpod_scheduler.app.status import StatusRow, last_stop_kept
from hyperpod_scheduler.app.wording import clock, count_of, when_seen_at
from hyperpod_scheduler.cost.prices import group_price
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
    if r.damaged:  # nothing of it is read from the store: not known, and said (its flag says why)
        return {"bills": None, "usd": None, "usd_per_hour": None, "price_is_upper_bound": False,
                "why": "its record is damaged: what it bills is not known", "from": None, "to": None}  # fmt: skip
    if g is None:
        hourly = r.usd_per_hour
        why = "not governed: no schedule stops it" if r.state != "stopped" else "stopped by hand"
        return {
            "bills": bool(hourly),
            "usd": None,
            "usd_per_hour": hourly,
            "price_is_upper_bound": r.price_is_upper_bound,
            "why": why,
            "from": None,
            "to": None,
        }
    bound = r.price_is_upper_bound  # the row's hourly figure prices a flexible group at its dearest type
    schedule = g.schedule
    if ctx.paused is not None:
        # No tick stops or starts anything while the fleet is paused: tonight it bills what it bills now.
        return _bill(schedule, now, r.usd_per_hour, f"{ctx.paused.line()}: it stays as it is", bound)
    stretch = money(None, schedule, now).night  # the night in progress or the next one, whole (cost.rates)
    zone = g.schedule.timezone
    if r.hold is not None and r.hold.state == "running":
        until = f" until {when_seen_at(r.hold.until, now, zone)}" if r.hold.until else " until released"
        why = f"held running by {r.hold.by}{until}: everything bills"
        if r.state in ("running", "stopping"):
            return _bill(schedule, now, r.usd_per_hour, why, bound)
        # Stopped (or coming back) now: the next tick starts it, and what bills is the sizes it comes back to.
        held = _bill(schedule, now, r.usd_per_hour_up, f"{why} once the next tick starts it", r.up_is_upper_bound)
        return held if r.usd_per_hour_up is not None else {**held, "bills": True}
    if stretch is None or forecast is None:
        return _bill(schedule, now, r.usd_per_hour, "the schedule does not stop it in the coming week", bound)
    begin, end = stretch
    known = kept_tonight(ctx, r, forecast)
    if known is None:  # no forecast, and no stop ran to say what one keeps: not known, and said so
        unread = "not looked at yet" if isinstance(forecast, NotLookedAt) else "cannot describe the cluster now"
        unknown = _bill(schedule, now, None, f"{unread}, and no stop has run: what its stop keeps is not known")
        return {**unknown, "bills": None}
    kept, why = known
    if not isinstance(forecast, Exception) and forecast.outcome in ("blocked", "refused"):
        # The planner or a guard would send no stop at all: everything bills, and the page says why.
        return _bill(schedule, now, r.usd_per_hour, f"a stop would not go out: {forecast.reason}", bound)
    blocked = next((f for f in r.flags if f.kind == "blocked"), None)
    if blocked is not None and r.state == "running" and not g.schedule.is_running(now):
        return _bill(schedule, now, r.usd_per_hour, f"still running: {blocked.text}", bound)
    if begin <= now and r.state in ("running", "starting") and not any(f.kind == "kept" for f in r.flags):
        # Off its window and up (a Start now, a stop that did not go out): tonight follows the
        # cluster, not the schedule; it bills until something stops it.
        ahead = g.schedule.transitions(now, now + WEEK)
        stop_at = next((t.at for t in ahead if t.state == "stopped"), None)
        nxt = f"the schedule's next stop {clock(stop_at, zone)}" if stop_at else "no scheduled stop this week"
        return _bill(schedule, now, r.usd_per_hour, f"{r.state} outside its window: bills until stopped ({nxt})", bound)
    if not kept:
        stops = "stopped now" if begin <= now else f"stops {clock(begin, zone)}"
        return _bill(schedule, now, 0.0, f"{stops}; nothing but storage bills until {clock(end, zone)}")
    # A kept group with no price: what bills is not known (not that group at $0), yet it bills.
    unpriced = any(k["usd_per_hour"] is None for k in kept)
    hourly = None if unpriced else sum(k["usd_per_hour"] for k in kept)
    groups = ", ".join(count_of(k["count"], k["type_text"]) for k in kept)
    bounded = any(k["price_is_upper_bound"] for k in kept)
    return {**_bill(schedule, now, hourly, f"{groups} kept: {why}", bounded), "bills": True, "kept": kept}


def kept_tonight(
    ctx: Context, r: StatusRow, forecast: StopForecast | Exception
) -> tuple[list[dict[str, Any]], str] | None:
    """The groups the schedule's stop keeps and why: what the planner and the guards would send
    (``app.actions.stop_forecast``), else (the cluster cannot be described) what the last stop kept,
    running or stopped now; None when neither is known."""
    if isinstance(forecast, Exception):
        billing = r.billing if r.state == "stopped" else last_stop_kept(ctx, r.key)
        if billing is None:
            return None
        kept = [
            {
                "group": b.group,
                "count": b.count,
                "instance_type": b.instance_type,
                "type_text": b.type_text,
                "usd_per_hour": b.usd_per_hour,
                "price_is_upper_bound": b.price_is_upper_bound,
            }
            for b in billing
        ]
        unread = "not looked at yet" if isinstance(forecast, NotLookedAt) else "cannot describe the cluster now"
        return kept, f"as the last stop kept them ({unread})"
    prices = ctx.prices()
    kept = []
    for k in forecast.kept:
        # Every type the group may run: a flexible group is priced at its dearest, as an upper bound.
        types = k.instance_types or ((k.instance_type,) if k.instance_type else ())
        price = group_price(types, prices)
        flexible = "flexible " + "|".join(t.removeprefix("ml.") for t in types) if len(types) > 1 else None
        kept.append(
            {
                "group": k.group,
                "count": k.after,
                "instance_type": k.instance_type,
                "type_text": k.instance_type or flexible,
                "usd_per_hour": None if price is None else round(price.times(k.after), 2),
                "price_is_upper_bound": price is not None and price.upper_bound,
                "reason": k.why,
                "kept_by": k.kept_by,
            }
        )
    if forecast.outcome == "busy":  # changing now: its groups' targets are where the update leaves them
        return kept, f"at the targets of the update in progress ({forecast.reason})"
    return kept, kept_why(forecast)


def _bill(schedule: Schedule, now: datetime, hourly: float | None, why: str, bound: bool = False) -> dict[str, Any]:
    """What ``hourly`` comes to over the schedule's night (``cost.rates.money``: the formula of every
    per-night figure, so this and ``status``'s kept cost per night are one figure). ``bound``: ``hourly``
    prices a flexible group at its dearest type, so the night bills up to it."""
    m = money(hourly, schedule, now)
    night = m.night
    total = None if hourly is None else round(m.per_night or 0.0, 2)
    return {
        "bills": bool(hourly),
        "usd_per_hour": None if hourly is None else round(hourly, 2),
        "price_is_upper_bound": bound and bool(hourly),
        "usd": total,
        "hours": round(m.night_hours, 1),
        "from": night[0].isoformat() if night else None,
        "to": night[1].isoformat() if night else None,
        "why": why,
    }
