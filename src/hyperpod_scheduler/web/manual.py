"""Manual actions from the dashboard: the preview of a stop or start, and hold, release, stop or start."""

from __future__ import annotations

from typing import Any

from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.app.instants import parse_instant
from hyperpod_scheduler.app.wording import when
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.guards.capacity import protections
from hyperpod_scheduler.store.records import HistoryEntry
from hyperpod_scheduler.web.core import ACTIONS, ActionName, DashboardCore, NotFound


def preview(dash: DashboardCore, name: str, action: str) -> dict[str, Any]:
    """What a stop or start from the dashboard would do, group by group, and what it is worth per
    hour; read-only (DescribeCluster, the record, the policy, prices)."""
    ctx = dash.context()
    _, ref = dash.target(ctx, name)
    record = ctx.store.get(ref.key)
    out: dict[str, Any] = {"action": action, "groups": [], "nothing": None, "in_flight": None, "error": None}
    if record is not None and record.pending is not None:
        out["in_flight"] = f"a {record.pending.action} sent {when(record.pending.created_at)} is still settling"
    view = dash.describe_cached(ctx, ref)
    if isinstance(view, Exception):
        out["error"] = f"cannot describe the cluster: {view}"
        return out
    prices = ctx.prices()
    policy = ref.settings.policy
    kept = {p.group: p for p in protections(view.groups, policy)}
    recorded = record.snapshot.sizes if record is not None and record.snapshot is not None else {}
    saved = still = 0.0
    for v in view.groups:
        now_count = max(v.current, v.target)
        if action == "stop":
            p = kept.get(v.name)
            after = min(p.keep_at, now_count) if p is not None else 0
            change = f"stays at {after}: {p.reason}" if p is not None and after else ("to 0" if now_count else "at 0")
        else:
            size = recorded.get(v.name)
            after = size.count if size is not None else now_count
            change = f"back to {after}" if size is not None and after != now_count else "as it is"
        price = prices.instance(v.instance_type) if v.instance_type else None
        hourly = None if price is None else price.usd
        if hourly is not None:
            saved += hourly * max(now_count - after, 0)
            still += hourly * after
        out["groups"].append(
            {
                "group": v.name,
                "instance_type": v.instance_type,
                "now": now_count,
                "after": after,
                "change": change,
                "usd_per_hour_each": hourly,
            }
        )
    if action == "stop" and not any(x["now"] > x["after"] for x in out["groups"]):
        out["nothing"] = (
            "already stopped: nothing would be sent"
            if all(x["now"] == 0 for x in out["groups"])
            else "every group with nodes is protected: nothing would be sent"
        )
    if action == "start" and not recorded:
        out["nothing"] = "no sizes recorded for this cluster: a start would do nothing"
    elif action == "start" and all(x["now"] == x["after"] for x in out["groups"]):
        out["nothing"] = "already at the recorded sizes: nothing would be sent"
    out["usd_per_hour_saved"] = round(saved, 2) if action == "stop" else None
    out["usd_per_hour_after"] = round(still, 2)
    out["checkpoints"] = action == "stop" and ref.settings.checkpoints is not None
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
) -> dict[str, Any]:
    """Hold, release, stop or start one cluster; recorded in the history with who asked."""
    if action not in ACTIONS:
        raise NotFound(f"action: {action!r} is not one of {', '.join(ACTIONS)}")
    dash.authorize(token)
    ctx = dash.context()
    try:
        return _act(dash, ctx, name, action, by, until, hold_state, reason)
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
) -> dict[str, Any]:
    g = dash.governed(ctx, name)
    who = f"dashboard:{(by or 'anonymous').strip()[:64]}"
    engine = ctx.engine(actor=who)
    now = ctx.now()
    if action == "hold":
        if hold_state not in ("running", "stopped"):
            raise UsageError(f"state: {hold_state!r} is not 'running' or 'stopped'")
        end = parse_instant(until, "until") if until else None
        if end is not None and end <= now:
            raise UsageError(f"until: {until!r} is not in the future")
        engine.set_hold(g.ref, hold_state, end, reason or "dashboard")  # type: ignore[arg-type]
        message = f"held {hold_state}" + (f" until {end.isoformat()}" if end else " until released")
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
    said = (reason or "").strip()[:500]
    shown = preview(dash, name, action)
    result = engine.act(
        g.ref,
        action,
        transition_id=f"dashboard-{action}@{now.isoformat()}",
        reason=f"dashboard: {said}" if said else "dashboard",
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
