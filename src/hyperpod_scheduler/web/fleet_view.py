"""The Fleet page: every cluster's row, the summary strip and the week's events worth a flag.

At fleet scale (issue 30) a request makes no AWS call per cluster: the governed clusters and their
DescribeCluster answers come from the dashboard's shared looks (app.looks), and the rows built from them
and the store are kept for ``ROWS_MAX_AGE_S`` (the page says as of when), rebuilt sooner when the looks
move (an engine's look, a refresh) or the dashboard acts. A request then searches, filters and takes one
page of them (web.fleet_query); the strip at the top stays the whole fleet's.

The first request of a fleet (a dashboard just started) waits for no AWS call either: its rows are the
store's, each marked as such ("as of 14:02 from the store; refreshing now", ``freshness`` in
``/api/fleet``, from ``app.freshness``), while the first refresh reads the fleet beside it and the page
says how far it has got; the rows are built again when it ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from hyperpod_scheduler.app.actions import actions
from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.app.freshness import Freshness, freshness
from hyperpod_scheduler.app.history import notable
from hyperpod_scheduler.app.looks import Look, NotLookedAt, Reading
from hyperpod_scheduler.app.status import StatusRow, fleet_status, status_row
from hyperpod_scheduler.app.wording import clock, countdown, usd, when
from hyperpod_scheduler.engine.fleet import Governed
from hyperpod_scheduler.engine.stop_forecast import StopForecast
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.inputs.text import clean
from hyperpod_scheduler.schedule.clock import zone as iana_zone
from hyperpod_scheduler.web import places
from hyperpod_scheduler.web.core import FSX_NOT_READ, WEEK, DashboardCore
from hyperpod_scheduler.web.fleet_query import FleetQuery, facets, listed
from hyperpod_scheduler.web.places import Place
from hyperpod_scheduler.web.tonight import tonight

# The rows are the store's of at most ROWS_MAX_AGE_S ago, or ROWS_STALE_S while a newer reading is
# being made beside the request (the page says as of when).
ROWS_MAX_AGE_S = 5.0
ROWS_STALE_S = 120.0  # above the page's own reload (every minute): a viewer is never the one who waits


def fleet(
    dash: DashboardCore,
    month: dict[str, Any] | None = None,
    ctx: Context | None = None,
    found: Sequence[Governed] | None = None,
    reading: Reading | None = None,
) -> list[dict[str, Any]]:
    """Every cluster: the governed ones, then every other the store remembers. ``found``: the
    governed clusters when the caller has read them (each reading is discovery: ListClusters and
    tags for tag-selected targets), else they are read here, once. ``reading``: the shared looks'
    reading they came from (each row says whether it is fresh from AWS or from the store); a governed
    cluster not looked at yet is not described here: its refresh reads it."""
    ctx = ctx or dash.context()
    doc = month if month is not None else dash.this_month(ctx)
    saved = {c["key"]: c["window"]["saving"] for c in doc["clusters"]}
    bounded = {c["key"] for c in doc["clusters"] if c.get("price_is_upper_bound")}
    found = governed_fleet(dash, ctx) if found is None else found
    governed = {g.ref.key: g for g in found}
    rows = []
    for r in fleet_status(ctx, governed=found):
        g = governed.get(r.key)
        look = reading.looks.get(r.key) if reading is not None and g is not None else None
        forecast: StopForecast | Exception | None = None
        if g is not None:
            if reading is not None and look is None:
                forecast = NotLookedAt(f"{g.ref.name}: not looked at yet")
            else:
                forecast = dash.stop_forecast(ctx, g.ref, g.schedule)
        row = {
            **fleet_row_of(r, saved.get(r.key, 0.0 if g is not None else None), ctx.now(), r.key in bounded),
            "tonight": tonight(ctx, g, r, forecast),
            "actions": available_actions(r, forecast),
        }
        if reading is not None:
            _mark(row, r.reads, r.recorded_at, look, reading.refreshing or reading.cold)
        if r.damaged and "freshness" in row:
            # A look may have answered, but every figure on the row is the store's, and that is unreadable.
            said = "its record is damaged: nothing on this row is known"
            row["freshness"] = {**row["freshness"], "source": "store", "fresh": False, "text": said}
        rows.append(row)
    # Two rows of one name (two accounts' `train`): their links carry account and region.
    profiles = {g.ref.key: g.ref.profile for g in found}
    spots = [(row["cluster"], Place(row["account"], row["region"], profiles.get(row["key"]))) for row in rows]
    for row, where in zip(rows, places.queries(spots), strict=True):
        row["where"] = where
    return rows


def _mark(row: dict[str, Any], reads: Any, recorded_at: datetime | None, look: Look | None, refreshing: bool) -> None:
    """The row's ``freshness`` (app.freshness: the record's reads and the dashboard's look as one value);
    a look that failed makes the row's reads and its first flag say since when AWS has not answered."""
    fresh: Freshness = freshness(reads, recorded_at, look.seen() if look is not None else None, refreshing)
    row["freshness"] = fresh.document()
    if not fresh.reachable and not row["aws"]["text"]:
        from hyperpod_scheduler.app.freshness import reads_document

        row["aws"] = reads_document(fresh.reads)
        row["flags"] = _stale_first(row["flags"], row["aws"]["text"])
    elif fresh.failed_look and not row["aws"]["text"]:
        # AWS answered the look with an error, or it failed on our side: not "unreachable", and still
        # nothing on the row is live. The flag says which error, and as of when the figures are.
        row["flags"] = _stale_first(row["flags"], fresh.text)


def _stale_first(flags: list[dict[str, str]], text: str) -> list[dict[str, str]]:
    """``flags`` with a ``stale`` flag where ``app.status`` puts the record's own: first, after a pending
    approval (a decision waits on it, and the page and ``status`` list one row's flags alike)."""
    waiting = [f for f in flags[:1] if f["kind"] == "approval"]
    return [*waiting, {"kind": "stale", "text": text}, *flags[len(waiting) :]]


def governed_fleet(dash: DashboardCore, ctx: Context) -> list[Governed]:
    """The governed clusters as the shared looks found them (discovery once per fleet, not per request);
    a fleet nothing of which could be read raises why (a 502)."""
    return dash.looks.reading(ctx).governed


def fleet_document(dash: DashboardCore) -> dict[str, Any]:
    """Every row, the summary strip and the week: built from the store and the looks, kept a few seconds."""
    ctx = dash.context()
    # First: a stale fleet starts its refresh beside this request. One not read yet starts it once its rows
    # are built from the store (below): a thousand DescribeCluster answers parsed beside that build would
    # slow it several times over on a small machine.
    dash.looks.reading(ctx, start_cold=False)
    now = ctx.now()
    # Kept while the config and the pause stay the same and no look or action moved since (app.looks):
    # a few seconds as they are, up to two minutes while they are built again beside the request.
    token = (ctx.config.model_dump_json(include={"targets", "schedules", "defaults", "cost"}), ctx.paused)
    fresh = dash.rows_max_age_s

    def build() -> dict[str, Any]:
        return _build(dash, ctx)

    doc = build() if fresh <= 0 else dict(dash.looks.kept("fleet", token, build, now, fresh, max(fresh, ROWS_STALE_S)))
    if doc.get("from_store"):
        dash.looks.reading(ctx)  # the rows from the store are built: the fleet's first refresh starts now
    return doc


def prewarm(dash: DashboardCore) -> None:
    """Build the rows again now, beside any request (a refresh has ended: the next viewer finds them
    built). Nothing to tell anyone if it fails: the next request builds them and says why."""
    with contextlib.suppress(HyperpodSchedulerError, OSError, ValueError):
        fleet_document(dash)


def _build(dash: DashboardCore, ctx: Context) -> dict[str, Any]:
    now = ctx.now()
    reading = dash.looks.reading(ctx, start_cold=False)
    found = reading.governed
    # A fleet not read from AWS yet: FSx as a refresh found it, never read inside this request.
    month = dash.this_month(ctx, aws=not reading.cold)
    rows = fleet(dash, month, ctx, found, reading)
    if any(
        r["recorded_at"]
        and (look := reading.looks.get(r["key"])) is not None
        and datetime.fromisoformat(r["recorded_at"]) > look.at
        for r in rows
    ):
        dash.looks.nudge(ctx)  # the engine wrote a record after its look (another process acted): read again
    sizes_at = reading.sizes_at
    summary = fleet_summary(ctx, rows, month, now, found)
    if FSX_NOT_READ in month.get("notes", []):
        summary["fsx_per_month_text"] = "not read yet"
    return {
        "rows": rows,
        "summary": summary,
        "week": week(ctx, rows, now),
        "as_of": now.isoformat(),
        "as_of_text": when(now),
        "sizes_as_of": sizes_at.isoformat() if sizes_at else None,
        "paused": ctx.paused.line() if ctx.paused else None,
        "from_store": reading.cold,
        "problems": [clean(str(p), one_line=True) for p in reading.problems],  # a tag's escape codes shown, not sent
    }


def refresh_state(dash: DashboardCore) -> dict[str, Any]:
    """The shared refresh as this request finds it (not kept with the rows: it moves every second)."""
    looks = dash.looks
    progress = looks.progress
    failure = looks.failure
    if progress is not None:
        text = f"reading the fleet from AWS now: {progress.done:,} of {progress.total:,} clusters"
    elif looks.refreshing:
        text = "reading the fleet from AWS now"
    else:
        text = None
    return {
        "refreshing": looks.refreshing,
        "done": progress.done if progress is not None else None,
        "total": progress.total if progress is not None else None,
        "refreshed_at": looks.refreshed_at.isoformat() if looks.refreshed_at is not None else None,
        "failure": failure,
        "text": text,
    }


def fleet_page(dash: DashboardCore, query: FleetQuery | None = None) -> dict[str, Any]:
    """The Fleet page: the summary strip, the clusters (with ``query``: the page of them it asks for;
    without: every one, as the self-contained HTML report shows them), and the week's events."""
    doc = fleet_document(dash)
    now = dash.now()
    rows = doc["rows"]
    sizes_at = datetime.fromisoformat(doc["sizes_as_of"]) if doc["sizes_as_of"] else None
    # The kept rows and transitions are shared by every request: what a page changes in its own (the
    # viewer's time zone, the buttons) is changed in copies.
    summary = {**doc["summary"], "transitions": [dict(t) for t in doc["summary"]["transitions"]]}
    out = {
        **doc,
        "summary": summary,
        "rows": [dict(r) for r in rows] if query is None else rows,
        "as_of_age": _ago(now - datetime.fromisoformat(doc["as_of"])),
        "sizes_text": f"cluster sizes as of {clock_hm(sizes_at)}, {_ago(now - sizes_at)}" if sizes_at else None,
        "refresh_failure": dash.looks.failure,
        "refresh": refresh_state(dash),
        "facets": facets(rows),
        "transitions_listed": listed(summary["transitions"]),
        "unpriced_listed": listed(doc["summary"]["unpriced"], 5),
        "week_listed": listed(doc["week"], 20),
    }
    if query is not None:
        selection = query.select(rows)
        out["rows"] = [dict(r) for r in selection.pop("rows")]
        out["selection"] = selection
    return out


def clock_hm(at: datetime) -> str:
    return f"{at:%H:%M}Z" if at.utcoffset() == timedelta(0) else f"{at:%H:%M %Z}"


def _ago(delta: timedelta) -> str:
    seconds = max(delta.total_seconds(), 0.0)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def week(ctx: Context, rows: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    names = {r["key"]: r["cluster"] for r in rows}
    by_key = {r["key"]: r for r in rows}
    # An unreadable entry is left out of the week (its cluster's row and the report say so), not the page.
    events = notable(ctx.store.history_all(now - WEEK, now, damaged=[]), names)

    def place(key: str) -> dict[str, Any]:
        # Two accounts' clusters of one name: the event says which, and links to that one (its row's
        # own address, as the row's link does); a lone name needs neither.
        row = by_key.get(key)
        if row is None or not row.get("where"):
            return {"where": "", "place": ""}
        spot = " · ".join(
            p for p in (f"account {row['account']}" if row.get("account") else "", row.get("region")) if p
        )
        return {"where": row["where"], "place": spot}

    return [
        {
            "at": n.at.isoformat(),
            "when": when(n.at),
            "cluster": n.cluster,
            "kind": n.kind,
            "text": n.text,
            "resolved": n.resolved,
            **place(n.key),
        }
        for n in reversed(events)
        if not n.key.startswith("agent/")
    ]


def fleet_row_of(
    r: StatusRow, month_saving: float | None, now: datetime | None = None, saving_bound: bool = False
) -> dict[str, Any]:
    """A status row as the pages show it: the document ``status --json`` prints, this month's saving, and
    the next transition in the schedule's own timezone with a countdown. ``saving_bound``: the saving
    prices a flexible group at its dearest type (``up to``)."""
    nxt = r.next_transition
    zone = iana_zone(r.timezone) if r.timezone else None
    local = f"{clock(nxt[0], zone)}" + (f" ({countdown(nxt[0] - now)})" if now is not None else "") if nxt else ""
    return {
        **r.document(),
        "month_saving_usd": None if month_saving is None else round(month_saving, 2),
        "month_saving_text": usd(month_saving, up_to=saving_bound),
        "month_saving_is_upper_bound": saving_bound,
        "next_local": local,
    }


def fleet_row(ctx: Context, g: Governed, month_saving: float | None) -> dict[str, Any]:
    """One fleet line: the status row ``status`` prints, and this month's saving."""
    return fleet_row_of(status_row(ctx, g), month_saving)


def available_actions(r: StatusRow, forecast: StopForecast | Exception | None) -> list[str]:
    """The buttons that make sense now (``app.actions.actions``, from what a stop would send)."""
    known = forecast if isinstance(forecast, StopForecast) else None
    return actions(r.state, bool(r.billing), r.hold is not None, known, r.recorded_sizes)


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
    saving_bound = any(c.get("price_is_upper_bound") for c in clusters)
    hourly_bound = any(r["price_is_upper_bound"] for r in rows if r["usd_per_hour"] is not None)
    fsx_month = sum(c.get("fsx_per_month") or 0.0 for c in clusters)
    billing = [r for r in rows if r["tonight"]["bills"]]
    return {
        "running": running,
        "stopped": stopped,
        "kept": kept,
        "usd_per_hour": round(sum(hourly), 2),
        "usd_per_hour_text": usd(sum(hourly), up_to=hourly_bound),
        "price_is_upper_bound": hourly_bound,
        "unpriced": unknown,
        "transitions": transitions,
        "month_saving": round(saving, 2),
        "month_saving_text": usd(saving, up_to=saving_bound),
        "month_saving_is_upper_bound": saving_bound,
        "fsx_per_month": round(fsx_month, 2),
        "fsx_per_month_text": usd(fsx_month),
        "billing_tonight": [r["cluster"] for r in billing],
        "month_from": now.replace(day=1, hour=0, minute=0, second=0, microsecond=0).isoformat(),
    }
