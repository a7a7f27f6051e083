"""The Schedules page: each schedule's week as a grid, who uses it, and saving an edited grid."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.app.actions import never_stopped
from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.app.status import status_row
from hyperpod_scheduler.cost.prices import group_price
from hyperpod_scheduler.engine.fleet import Governed
from hyperpod_scheduler.engine.stop_forecast import StopForecast
from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError
from hyperpod_scheduler.store.errors import StoreError
from hyperpod_scheduler.web import grid as grids
from hyperpod_scheduler.web.config_edit import read_document, write_schedule
from hyperpod_scheduler.web.core import DashboardCore, NotFound


def schedules(dash: DashboardCore, tz: str | None) -> dict[str, Any]:
    zone = grids.viewer_zone(tz)
    ctx = dash.context()
    now = ctx.now()
    try:
        governed = dash.looks.reading(ctx).governed  # the shared reading: no discovery per view
    except (ClientError, BotoCoreError, HyperpodSchedulerError):
        governed = ctx.fleet().governed()  # nothing could be read: the schedules, with whatever could
    users: dict[str, list[Governed]] = {}
    for g in governed:
        users.setdefault(g.schedule_label, []).append(g)
    out = []
    for name, value in ctx.config.schedules.items():
        pattern = grids.pattern_of(name, value)
        own = pattern.timezone
        entry = grids.entry_mapping(value)
        calendars = entry.get("holidays") or []
        calendars = [calendars] if isinstance(calendars, str) else list(calendars)
        monday = grids.week_monday(now, own)
        week = [monday + timedelta(days=d) for d in range(7)]
        skip = {str(d) for d in entry.get("skip_dates") or []}
        named = dict(grids.holiday_names(calendars, monday, monday + timedelta(days=7)))
        week_holidays = {
            d: named.get(day) or ("skip date" if str(day) in skip else None)
            for d, day in enumerate(week)
            if day in named or str(day) in skip
        }
        upcoming = grids.holiday_names(calendars, now.astimezone(own).date(), now.date() + timedelta(days=60))
        grid = grids.grid_for(pattern, own, monday)
        running = sum(sum(row) for row in grid) / 4
        releasable = _releasable(dash, ctx, users.get(name, []))
        out.append(
            {
                "name": name,
                "expression": pattern.expression,
                "timezone": own.key,
                "holidays": calendars,
                "skip_dates": sorted(skip),
                "mode": pattern.mode,
                "in_use": name in users,
                "clusters": [g.ref.name for g in users.get(name, [])],
                "grid": grid,
                "viewer_grid": grids.grid_for(pattern, zone, grids.week_monday(now, zone)),
                "week_dates": [f"{day.day} {day:%b}" for day in week],
                "week_text": f"{monday.day} {monday:%b %Y}",
                "week_holidays": week_holidays,
                "upcoming_holidays": [
                    {"date": str(day), "date_text": f"{day:%a} {day.day} {day:%b}", "name": holiday}
                    for day, holiday in upcoming[:6]
                ],
                "hours_running": running,
                "hours_stopped": 168 - running,
                "stopped_pct": round(100 * (168 - running) / 168),
                "releasable_usd_per_hour": _rounded(releasable[0]),
                "releasable_is_upper_bound": releasable[1],
                "never_stopped": _never_stopped(dash, ctx, users.get(name, [])),
            }
        )
    return {"viewer_timezone": zone.key, "days": list(grids.day_names()), "schedules": out}


# ---- writes ----------------------------------------------------------------------------------
def save_schedule(dash: DashboardCore, name: str, grid: grids.Grid, token: str | None) -> dict[str, Any]:
    dash.authorize(token)
    path = dash.config_path
    if dash.source is not None:  # never a local file that happens to be here: the workers read the table
        raise UsageError(
            "schedule: this dashboard shows the fleet config pushed to the hub's table; edit its YAML and "
            "run `hyperpod-scheduler config push`"
        )
    if path is None:
        raise UsageError("schedule: the dashboard was started without a config file; nothing to write to")
    schedules = read_document(path).get("schedules") or {}
    if name not in schedules:
        raise NotFound(f"schedule: {name!r} is not in {path}")
    pattern = grids.pattern_of(name, schedules[name])
    entry = grids.edited_entry(name, schedules[name], grids.check_grid(grid), pattern.timezone.key)
    write_schedule(path, name, entry)
    return {"name": name, "windows": entry["windows"], "timezone": entry["timezone"]}


def _never_stopped(dash: DashboardCore, ctx: Context, clusters: list[Governed]) -> list[str]:
    """The clusters whose scheduled stop sends nothing because it keeps every group with nodes
    (``app.actions.never_stopped``); one that cannot be described is left out (not claimed either way)."""
    out = []
    for g in clusters:
        forecast = dash.stop_forecast(ctx, g.ref, g.schedule)
        if isinstance(forecast, StopForecast) and never_stopped(forecast, _recorded(ctx, g)):
            out.append(g.ref.name)
    return out


def _recorded(ctx: Any, g: Governed) -> dict[str, int]:
    """The sizes the cluster's record keeps (what a start restores); none from a damaged record (its Fleet
    row says so): a never-stopped claim needs sizes, so it is not made for it."""
    try:
        record = ctx.store.get(g.ref.key)
    except StoreError:
        return {}
    return {n: s.count for n, s in record.snapshot.sizes.items()} if record and record.snapshot else {}


def _rounded(usd: float | None) -> float | None:
    return None if usd is None else round(usd, 2)


def _releasable(dash: DashboardCore, ctx: Context, clusters: list[Governed]) -> tuple[float | None, bool]:
    """What the clusters on a schedule bill an hour while running, less what their stops keep: the
    figure a stopped hour saves (from recorded sizes; a cluster never stopped yet counts nothing). What
    a stop keeps is the planner's and the guards' answer; when the cluster cannot be described, what
    its last stop kept. None: a group the stops release has no price (a type the price list lacks), so
    the figure is not known; the priced groups alone would understate it. With it, whether it is an
    upper bound (a flexible group priced at its dearest type)."""
    prices = ctx.prices()
    total, bound = 0.0, False
    for g in clusters:
        try:
            record = ctx.store.get(g.ref.key)
        except StoreError:
            return None, bound  # a damaged record (its Fleet row says so): what its stops release is not known
        sizes = record.snapshot.sizes if record is not None and record.snapshot is not None else {}
        forecast = dash.stop_forecast(ctx, g.ref, g.schedule) if sizes else None
        if isinstance(forecast, StopForecast):
            kept = {k.group: k.after for k in forecast.kept}
        else:
            kept = {k.group: k.kept for k in status_row(ctx, g).protected}
        for group, size in sizes.items():
            released = max(size.count - kept.get(group, 0), 0)
            if not released:
                continue
            price = group_price(size.types, prices)  # a flexible group: its dearest type
            if price is None:
                return None, bound
            total += price.times(released)
            bound = bound or price.upper_bound
    return total, bound
