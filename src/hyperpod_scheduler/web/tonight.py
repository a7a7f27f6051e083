"""What a cluster bills in its coming stopped stretch (tonight, or the weekend), and why."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.app.status import StatusRow
from hyperpod_scheduler.app.wording import clock, count_of, when
from hyperpod_scheduler.engine.fleet import Governed
from hyperpod_scheduler.guards.capacity import protections
from hyperpod_scheduler.web.core import WEEK, DashboardCore


def tonight(dash: DashboardCore, ctx: Context, g: Governed | None, r: StatusRow) -> dict[str, Any]:
    """What this cluster bills in its coming stopped stretch (tonight, or the weekend), and why."""
    now = ctx.now()
    if g is None:
        hourly = r.usd_per_hour
        why = "not governed: no schedule stops it" if r.state != "stopped" else "stopped by hand"
        return {"bills": bool(hourly), "usd": None, "usd_per_hour": hourly, "why": why, "from": None, "to": None}
    stretch = stopped_stretch(g, now)
    zone = g.schedule.timezone
    if r.hold is not None and r.hold.state == "running":
        hourly = r.usd_per_hour
        until = f" until {when(r.hold.until, zone)}" if r.hold.until else " until released"
        return _bill(stretch, hourly, f"held running by {r.hold.by}{until}: everything bills")
    if stretch is None:
        return _bill(None, r.usd_per_hour, "the schedule does not stop it in the coming week")
    begin, end = stretch
    kept, why = kept_tonight(dash, ctx, g, r)
    blocked = next((f for f in r.flags if f.kind == "blocked"), None)
    if blocked is not None and r.state == "running" and not g.schedule.is_running(now):
        return _bill(stretch, r.usd_per_hour, f"still running: {blocked.text}")
    if begin <= now and r.state in ("running", "starting") and not any(f.kind == "kept" for f in r.flags):
        # Off its window and up (a Start now, a stop that did not go out): tonight follows the
        # cluster, not the schedule; it bills until something stops it.
        ahead = g.schedule.transitions(now, now + WEEK)
        stop_at = next((t.at for t in ahead if t.state == "stopped"), None)
        nxt = f"the schedule's next stop {clock(stop_at, zone)}" if stop_at else "no scheduled stop this week"
        return _bill(stretch, r.usd_per_hour, f"{r.state} outside its window: bills until stopped ({nxt})")
    if not kept:
        stops = "stopped now" if begin <= now else f"stops {clock(begin, zone)}"
        return _bill(stretch, 0.0, f"{stops}; nothing but storage bills until {clock(end, zone)}")
    hourly = sum(k["usd_per_hour"] or 0.0 for k in kept)
    groups = ", ".join(count_of(k["count"], k["instance_type"]) for k in kept)
    return {**_bill(stretch, hourly, f"{groups} kept: {why}"), "kept": kept}


def kept_tonight(dash: DashboardCore, ctx: Context, g: Governed, r: StatusRow) -> tuple[list[dict[str, Any]], str]:
    """The groups a stop would keep and why: from DescribeCluster and the policy, else from what the
    last stop kept."""
    prices = ctx.prices()
    view = dash.describe_cached(ctx, g.ref)
    if isinstance(view, Exception):
        kept = [
            {"group": b.group, "count": b.count, "instance_type": b.instance_type, "usd_per_hour": b.usd_per_hour}
            for b in r.billing
        ]
        return kept, "as the last stop kept them (cannot describe the cluster now)"
    kept, reasons = [], []
    for p in protections(view.groups, g.policy):
        group = view.group(p.group)
        itype = group.instance_type if group is not None else None
        price = prices.instance(itype) if itype else None
        if p.keep_at > 0:
            kept.append(
                {
                    "group": p.group,
                    "count": p.keep_at,
                    "instance_type": itype,
                    "usd_per_hour": None if price is None else round(price.usd * p.keep_at, 2),
                    "reason": p.reason,
                }
            )
            reasons.append(_reason_short(p.reason))
    return kept, "; ".join(dict.fromkeys(reasons))


def stopped_stretch(g: Governed, now: datetime) -> tuple[datetime, datetime] | None:
    """The schedule's coming (or current) stopped stretch, within a week."""
    schedule = g.schedule
    ahead = schedule.transitions(now, now + WEEK)
    if not schedule.is_running(now):
        end = next((t.at for t in ahead if t.state == "running"), now + WEEK)
        return now, end
    begin = next((t.at for t in ahead if t.state == "stopped"), None)
    if begin is None:
        return None
    end = next((t.at for t in ahead if t.state == "running" and t.at > begin), now + WEEK)
    return begin, end


def _bill(stretch: tuple[datetime, datetime] | None, hourly: float | None, why: str) -> dict[str, Any]:
    hours = (stretch[1] - stretch[0]).total_seconds() / 3600 if stretch else 0.0
    total = None if hourly is None else round(hourly * hours, 2)
    return {
        "bills": bool(hourly),
        "usd_per_hour": None if hourly is None else round(hourly, 2),
        "usd": total,
        "hours": round(hours, 1),
        "from": stretch[0].isoformat() if stretch else None,
        "to": stretch[1].isoformat() if stretch else None,
        "why": why,
    }


def _reason_short(reason: str) -> str:
    """The first clause of a protection's reason (``scarce capacity (ml.p5.48xlarge) ...``)."""
    text = reason.split(" is not released")[0].split(" stays up with")[0]
    if "Slurm" in reason and "stays up" in reason:
        return "the Slurm head stays up with the kept compute group"
    return text
