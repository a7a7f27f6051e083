"""Manual actions from the dashboard: the preview of a stop or start, and hold, release, stop or start."""

from __future__ import annotations

from typing import Any

from hyperpod_scheduler.app.actions import (
    act_now,
    change_text,
    check_by,
    check_hold,
    check_reason,
    nothing_text,
    start_forecast,
    stop_forecast,
)
from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.app.wording import when
from hyperpod_scheduler.cost.prices import group_price
from hyperpod_scheduler.store.records import HistoryEntry
from hyperpod_scheduler.web.core import ACTIONS, ActionName, DashboardCore, NotFound
from hyperpod_scheduler.web.places import ANYWHERE, Place


def preview(dash: DashboardCore, name: str, action: str, place: Place = ANYWHERE) -> dict[str, Any]:
    """What a stop or start from the dashboard would do, group by group, and what it is worth per
    hour; read-only (DescribeCluster, the record, the policy, prices)."""
    ctx = dash.context()
    _, ref = dash.target(ctx, name, place)
    record = ctx.store.get(ref.key)
    out: dict[str, Any] = {"action": action, "groups": [], "nothing": None, "in_flight": None, "error": None}
    if record is not None and record.pending is not None:
        out["in_flight"] = f"a {record.pending.action} sent {when(record.pending.created_at)} is still settling"
    view = dash.describe_cached(ctx, ref)
    if isinstance(view, Exception):
        out["error"] = f"cannot describe the cluster: {view}"
        return out
    prices = ctx.prices()
    # A stop: what the planner and the guards would send now (app.actions), the same answer as `plan`.
    forecast = stop_forecast(ctx, ref, view) if action == "stop" else None
    fates = {g.group: g for g in forecast.groups} if forecast is not None else {}
    # A start: the planner's own plan_start and the hold that would refuse it (app.actions), never the
    # recorded sizes alone (a group replaced while stopped is refused; one set by hand is kept).
    starting = start_forecast(ctx, ref, view) if action == "start" else None
    comes = {g.group: g for g in starting.groups} if starting is not None else {}
    saved: float | None = 0.0
    still: float | None = 0.0
    bound = False  # a flexible group with nodes is priced at its dearest type: "up to"
    unpriced: list[str] = []  # groups with nodes and no price: the figures they count in are not known
    for v in view.groups:
        now_count = max(v.current, v.target)
        fate = fates.get(v.name)
        kept_by = ""
        if fate is not None:
            after, change, kept_by = fate.after, change_text(fate), fate.kept_by
        elif v.name in comes:
            after, change = comes[v.name].after, comes[v.name].change
        else:
            after, change = now_count, "as it is"
        price = group_price(v.instance_types, prices)  # a flexible group: its dearest type, an upper bound
        hourly = None if price is None else price.usd
        if price is None and (now_count > 0 or after > 0):
            unpriced.append(v.name)
        bound = bound or (price is not None and price.upper_bound and (now_count > 0 or after > 0))
        # A group with nodes and no price (a flexible group, a type the price list lacks) makes the
        # figure it counts in unknown, never the priced groups' sum.
        if max(now_count - after, 0):
            saved = None if hourly is None or saved is None else saved + hourly * (now_count - after)
        if after:
            still = None if hourly is None or still is None else still + hourly * after
        out["groups"].append(
            {
                "group": v.name,
                "instance_type": v.instance_type,
                "now": now_count,
                "after": after,
                "change": change,
                "kept_by": kept_by,
                "usd_per_hour_each": hourly,
                "price_is_upper_bound": price is not None and price.upper_bound,
            }
        )
    if forecast is not None:
        out["nothing"] = nothing_text(forecast)
        out["outcome"] = forecast.outcome
    if starting is not None:
        out["nothing"] = starting.nothing
        out["outcome"] = starting.outcome
        out["notes"] = list(starting.notes)
    out["usd_per_hour_saved"] = round(saved, 2) if action == "stop" and saved is not None else None
    out["usd_per_hour_after"] = None if still is None else round(still, 2)
    out["price_is_upper_bound"] = bound
    out["unpriced"] = unpriced
    out["checkpoints"] = forecast is not None and forecast.audited_at_stop
    return out


def act(
    dash: DashboardCore,
    name: str,
    action: str,
    token: str | None,
    by: str = "",
    until: str | None = None,
    hold_state: str = "running",
    reason: str = "",
    place: Place = ANYWHERE,
) -> dict[str, Any]:
    """Hold, release, stop or start one cluster; recorded in the history with who asked."""
    if action not in ACTIONS:
        raise NotFound(f"action: {action!r} is not one of {', '.join(ACTIONS)}")
    dash.authorize(token)
    ctx = dash.context()
    try:
        return _act(dash, ctx, name, action, by, until, hold_state, reason, place)
    finally:
        if ctx is not dash.fixed_context:
            ctx.close()  # a checkpoint channel a stop opened


def _act(
    dash: DashboardCore,
    ctx: Context,
    name: str,
    action: ActionName,
    by: str,
    until: str | None,
    hold_state: str,
    reason: str,
    place: Place,
) -> dict[str, Any]:
    g = dash.governed(ctx, name, place)
    who = f"dashboard:{check_by(by or '', 'by') or 'anonymous'}"
    engine = ctx.engine(actor=who)
    now = ctx.now()
    if action == "hold":
        kept, end = check_hold(hold_state, until, now, state_field="state", until_field="until")
        engine.set_hold(g.ref, kept, end, check_reason(reason or "", "reason") or "dashboard")
        message = f"held {kept}" + (f" until {end.isoformat()}" if end else " until released")
        return {"cluster": name, "action": action, "kind": "ok", "message": message, "by": who}
    if action == "release":
        released = engine.release(g.ref)
        return {
            "cluster": name,
            "action": action,
            "kind": "ok" if released else "noop",
            "message": "released" if released else "no hold to release",
            "by": who,
        }
    said = check_reason(reason or "", "reason")
    shown = preview(dash, name, action, place)
    result = act_now(
        engine, g.ref, action, now, source="dashboard", reason=f"dashboard: {said}" if said else "dashboard"
    )
    # The engine writes history when an update settles (possibly on a later tick, by the
    # scheduler); this line records who asked, at once.
    ctx.store.append_history(
        HistoryEntry(
            key=g.ref.key,
            at=now,
            action=f"manual-{action}",
            actor=who,
            outcome=result.kind,
            detail={
                "message": result.message,
                "reason": said or "dashboard",
                "to_zero": [x["group"] for x in shown["groups"] if x["after"] == 0 and (x["now"] or 0) > 0],
                "stays": {x["group"]: x["after"] for x in shown["groups"] if x["after"]},
            },
        )
    )
    return {"cluster": name, "action": action, "kind": result.kind, "message": result.message, "by": who}
