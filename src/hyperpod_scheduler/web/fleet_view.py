"""The Fleet page: every cluster's row, the summary strip and the week's events worth a flag."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.app.history import notable
from hyperpod_scheduler.app.status import StatusRow, fleet_status, status_row
from hyperpod_scheduler.app.wording import clock, countdown, usd, when
from hyperpod_scheduler.engine.fleet import Governed
from hyperpod_scheduler.schedule.clock import zone as iana_zone
from hyperpod_scheduler.web import acting
from hyperpod_scheduler.web.core import WEEK, DashboardCore
from hyperpod_scheduler.web.tonight import tonight


def fleet(
    dash: DashboardCore,
    month: dict[str, Any] | None = None,
    ctx: Context | None = None,
    found: Sequence[Governed] | None = None,
) -> list[dict[str, Any]]:
    """Every cluster: the governed ones, then every other the store remembers. ``found``: the
    governed clusters when the caller has read them (each reading is discovery: ListClusters and
    tags for tag-selected targets), else they are read here, once."""
    ctx = ctx or dash.context()
    doc = month if month is not None else dash.this_month(ctx)
    saved = {c["key"]: c["window"]["saving"] for c in doc["clusters"]}
    found = governed_fleet(ctx) if found is None else found
    governed = {g.ref.key: g for g in found}
    rows = []
    for r in fleet_status(ctx, governed=found):
        g = governed.get(r.key)
        rows.append(
            {
                **fleet_row_of(r, saved.get(r.key, 0.0 if g is not None else None), ctx.now()),
                "tonight": tonight(dash, ctx, g, r),
                "actions": available_actions(r),
            }
        )
    return rows


def governed_fleet(ctx: Context) -> list[Governed]:
    fleet = ctx.fleet()
    found = fleet.governed()
    unread = [p.cause for p in fleet.problems if p.cause is not None]
    if unread and not found:
        raise unread[0]  # nothing could be read at all: say why (502), rather than an empty fleet
    return found


def fleet_page(dash: DashboardCore) -> dict[str, Any]:
    """The Fleet page: the summary strip, every cluster, and the week's events worth a flag. The
    governed clusters are read once for all of it."""
    ctx = dash.context()
    now = ctx.now()
    month = dash.this_month(ctx)
    found = governed_fleet(ctx)
    rows = fleet(dash, month, ctx, found)
    return {
        "rows": rows,
        "summary": fleet_summary(ctx, rows, month, now, found),
        "week": week(ctx, rows, now),
        "as_of": now.isoformat(),
        "as_of_text": when(now),
        "paused": ctx.paused.line() if ctx.paused else None,
    }


def week(ctx: Context, rows: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    names = {r["key"]: r["cluster"] for r in rows}
    events = notable(ctx.store.history_all(now - WEEK, now), names)
    return [
        {
            "at": n.at.isoformat(),
            "when": when(n.at),
            "cluster": n.cluster,
            "kind": n.kind,
            "text": n.text,
            "resolved": n.resolved,
        }
        for n in reversed(events)
        if not n.key.startswith("agent/")
    ]


def fleet_row_of(r: StatusRow, month_saving: float | None, now: datetime | None = None) -> dict[str, Any]:
    """A status row as the pages show it: the document ``status --json`` prints, this month's saving, and
    the next transition in the schedule's own timezone with a countdown."""
    nxt = r.next_transition
    zone = iana_zone(r.timezone) if r.timezone else None
    local = f"{clock(nxt[0], zone)}" + (f" ({countdown(nxt[0] - now)})" if now is not None else "") if nxt else ""
    return {
        **r.document(),
        "month_saving_usd": None if month_saving is None else round(month_saving, 2),
        "month_saving_text": usd(month_saving),
        "next_local": local,
    }


def fleet_row(ctx: Context, g: Governed, month_saving: float | None) -> dict[str, Any]:
    """One fleet line: the status row ``status`` prints, and this month's saving."""
    return fleet_row_of(status_row(ctx, g), month_saving)


def available_actions(r: StatusRow) -> list[str]:
    """The buttons that make sense now (``acting.buttons``)."""
    return acting.buttons(r.state, bool(r.billing), r.hold is not None)


def fleet_summary(
    ctx: Context,
    rows: list[dict[str, Any]],
    month: dict[str, Any],
    now: datetime,
    found: Sequence[Governed] | None = None,
) -> dict[str, Any]:
    """The strip at the top of the Fleet page: counts, what bills now, tonight's transitions with local
    times and countdowns, the month's saving and the FSx that bills whatever the schedule does.
    ``found``: the governed clusters the rows were made from (read again when not given)."""
    running = sum(1 for r in rows if r["state"] == "running")
    kept = sum(1 for r in rows if r["state"] == "stopped" and r["billing"])
    stopped = sum(1 for r in rows if r["state"] == "stopped" and not r["billing"])
    hourly = [r["usd_per_hour"] for r in rows if r["usd_per_hour"] is not None]
    unknown = [r["cluster"] for r in rows if r["usd_per_hour"] is None]
    transitions = []
    governed = {g.ref.key: g for g in (ctx.fleet().governed() if found is None else found)}
    for r in rows:
        g = governed.get(r["key"])
        if g is None:
            continue
        zone = g.schedule.timezone
        for t in g.schedule.transitions(now, now + timedelta(hours=24)):
            transitions.append(
                {
                    "cluster": r["cluster"],
                    "state": t.state,
                    "at": t.at.isoformat(),
                    "local": clock(t.at, zone),
                    "utc": clock(t.at),
                    "countdown": countdown(t.at - now),
                }
            )
    transitions.sort(key=lambda t: t["at"])
    clusters = month.get("clusters", [])
    saving = sum(c["window"]["saving"] for c in clusters)
    fsx_month = sum(c.get("fsx_per_month") or 0.0 for c in clusters)
    billing = [r for r in rows if r["tonight"]["bills"]]
    return {
        "running": running,
        "stopped": stopped,
        "kept": kept,
        "usd_per_hour": round(sum(hourly), 2),
        "usd_per_hour_text": usd(sum(hourly)),
        "unpriced": unknown,
        "transitions": transitions,
        "month_saving": round(saving, 2),
        "month_saving_text": usd(saving),
        "fsx_per_month": round(fsx_month, 2),
        "fsx_per_month_text": usd(fsx_month),
        "billing_tonight": [r["cluster"] for r in billing],
        "month_from": now.replace(day=1, hour=0, minute=0, second=0, microsecond=0).isoformat(),
    }
