"""What the dashboard shows and does, as plain dicts (the JSON API returns them; the pages render them).

The shell around the library: config, state store, clock and AWS clients come from a ``Dashboard``;
every figure comes from the same functions the CLI uses (fleet, schedule, cost, guards, engine).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.app import report as reports
from hyperpod_scheduler.app.compose import Context, Source, chain_clients
from hyperpod_scheduler.app.history import notable, sentence
from hyperpod_scheduler.app.instants import parse_instant
from hyperpod_scheduler.app.status import StatusRow, fleet_status, status_row
from hyperpod_scheduler.app.wording import clock, count_of, countdown, duration, usd, when
from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.config.load import config_path, load_config
from hyperpod_scheduler.cost import summary
from hyperpod_scheduler.cost.fsx import FileSystem
from hyperpod_scheduler.cost.savings import Report
from hyperpod_scheduler.cost.settings import CostSettings
from hyperpod_scheduler.engine import approvals
from hyperpod_scheduler.engine.fleet import OUTSIDE, Governed, ref_for
from hyperpod_scheduler.engine.runner import ClusterRef
from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError
from hyperpod_scheduler.guards.capacity import protections
from hyperpod_scheduler.inputs.text import clean
from hyperpod_scheduler.schedule.clock import zone as iana_zone
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.store.outcomes import read_phases
from hyperpod_scheduler.store.records import HistoryEntry
from hyperpod_scheduler.web import acting, approval_view, truth
from hyperpod_scheduler.web import grid as grids
from hyperpod_scheduler.web.charts import savings_charts
from hyperpod_scheduler.web.config_edit import read_document, write_schedule
from hyperpod_scheduler.web.svg import timeline_svg
from hyperpod_scheduler.web.timeline import KINDS, LABELS, group_rows, markers

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from hyperpod_scheduler.store.base import StateStore

AUDIT_KEYS = ("jobs", "signalled", "drained", "requeued", "resubmit", "checkpoint", "checkpoints", "audit")
DESCRIBE_CACHE_S = 60.0  # the fleet page describes each cluster for its "why"; a minute-old answer will do
WINDOW_BACK = timedelta(days=7)  # the timeline: the week behind and two days ahead
WINDOW_AHEAD = timedelta(days=2)
WEEK = timedelta(days=7)
ActionName = Literal["hold", "release", "stop", "start"]
ACTIONS: tuple[ActionName, ...] = ("hold", "release", "stop", "start")
FSX_CACHE_S = reports.FSX_CACHE_S


class NotFound(HyperpodSchedulerError):
    """A cluster or schedule the dashboard does not know."""


class Refused(HyperpodSchedulerError):
    """An action without the right token (401), or any action on a read-only dashboard (403)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Dashboard:
    """Everything the app needs; ``token`` None makes it read-only."""

    config_file: str | None = None
    state: str | None = None
    token: str | None = None
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    client_for: Callable[[ClusterRef], SageMakerClient] | None = None
    file_systems: reports.FileSystemSource | None = None  # default: the cost report's FSx discovery
    fixed_context: Context | None = None  # a caller's context (the HTML report), used as is
    aws: AwsClients = field(default_factory=AwsClients)  # FSx, S3 and Pricing clients (the demo: its emulator)
    cost: CostSettings | None = None  # the report's cost settings, instead of the config's (report --html)
    source: Callable[[], Source] | None = None  # the launcher's (the fleet's table), instead of config_file
    _store: StateStore | None = None
    # FSx discovery is several AWS calls per cluster; file systems rarely change, so a recent answer
    # is reused rather than paid for on every page view.
    _fsx_cache: dict[tuple[str, ...], tuple[float, dict[str, list[FileSystem]], list[str]]] = field(
        default_factory=dict
    )
    _describe_cache: dict[str, tuple[float, Any]] = field(default_factory=dict)

    @property
    def read_only(self) -> bool:
        return not self.token

    @property
    def config_path(self) -> Path | None:
        return config_path(self.config_file)

    def store(self) -> StateStore:
        if self._store is None and self.source is not None:
            self._store = self.source().store
        if self._store is None:
            self._store = open_store(self.state or load_config(self.config_file).state)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def context(self) -> Context:
        """A fresh context per request: the config is re-read, so a schedule saved in the grid applies."""
        if self.fixed_context is not None:
            return self.fixed_context
        if self.source is not None:
            src = self.source()
            return Context(
                src.config, self.store(), src.clients, self.now, actor="dashboard", paused=src.paused,
                accounts=src.accounts,
            )  # fmt: skip
        return Context(
            load_config(self.config_file), self.store(), chain_clients(self.client_for), self.now, actor="dashboard"
        )

    # ---- access ----------------------------------------------------------------------------------
    def token_matches(self, given: str | None) -> bool:
        """Whether ``given`` is the access token (constant time, so a guess learns nothing)."""
        return bool(self.token) and bool(given) and hmac.compare_digest(str(given).encode(), str(self.token).encode())

    def authorize(self, given: str | None) -> None:
        if not self.token:
            raise Refused("the dashboard is read-only: it was started without an access token", 403)
        # Constant time, so the comparison does not leak how much of a guess was right.
        if not given or not hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8")):
            raise Refused("access token missing or wrong: action refused", 401)

    # ---- reads -----------------------------------------------------------------------------------
    def governed(self, ctx: Context, name: str) -> Governed:
        g = ctx.fleet().find(name)
        if g is None:
            raise NotFound(f"cluster: {name!r} is not governed by the config")
        return g

    def target(self, ctx: Context, name: str) -> tuple[Governed | None, ClusterRef]:
        """A governed cluster, or one the store remembers (a manual stop outside the config)."""
        g = ctx.fleet().find(name)
        if g is not None:
            return g, g.ref
        for key in ctx.store.list_keys():
            if key.rsplit("/", 1)[-1] == name and not key.startswith("agent/"):
                region, _ = reports.split_key(key)
                return None, ClusterRef(key, name, region).governed(ctx.fleet().settings(OUTSIDE))
        raise NotFound(f"cluster: {name!r} is not governed by the config and not in the state store")

    def describe_cached(self, ctx: Context, ref: ClusterRef) -> Any:
        """DescribeCluster through the engine (answers checked), or the exception it raised; reused for
        a minute, so a fleet page does not describe every cluster on every view."""
        hit = self._describe_cache.get(ref.key)
        if hit is not None and time.monotonic() - hit[0] < DESCRIBE_CACHE_S:
            return hit[1]
        try:
            answer: Any = ctx.engine().describe(ref)
        except (ClientError, BotoCoreError, HyperpodSchedulerError) as exc:
            answer = exc
        self._describe_cache[ref.key] = (time.monotonic(), answer)
        return answer

    def report(self, ctx: Context, since: datetime, until: datetime) -> Report:
        """The same computation as ``report`` on the command line (``app.report.build``)."""
        settings = self.cost or reports.cost_settings(ctx.config)
        notes: list[str] = []
        table = reports.prices(settings.prices, ctx.now(), self.aws, notes)
        return reports.build(ctx.store, table, self._systems(ctx), since, until, notes)

    def _systems(self, ctx: Context) -> reports.FileSystemSource:
        if self.file_systems is not None:
            return self.file_systems
        return reports.FileSystemFinder(
            ctx.config,
            lambda region, profile: ctx.client_for(ClusterRef("", "", region, profile)),
            self.aws,
            cache_s=FSX_CACHE_S,
            cache=self._fsx_cache,
        )

    def _month(self, ctx: Context) -> dict[str, Any]:
        now = ctx.now()
        month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        return summary.as_document(self.report(ctx, month, now)) if now > month else {"clusters": []}

    def fleet(
        self,
        month: dict[str, Any] | None = None,
        ctx: Context | None = None,
        found: Sequence[Governed] | None = None,
    ) -> list[dict[str, Any]]:
        """Every cluster: the governed ones, then every other the store remembers. ``found``: the
        governed clusters when the caller has read them (each reading is discovery: ListClusters and
        tags for tag-selected targets), else they are read here, once."""
        ctx = ctx or self.context()
        doc = month if month is not None else self._month(ctx)
        saved = {c["key"]: c["window"]["saving"] for c in doc["clusters"]}
        found = self._governed_fleet(ctx) if found is None else found
        governed = {g.ref.key: g for g in found}
        rows = []
        for r in fleet_status(ctx, governed=found):
            g = governed.get(r.key)
            rows.append(
                {
                    **fleet_row_of(r, saved.get(r.key, 0.0 if g is not None else None), ctx.now()),
                    "tonight": self._tonight(ctx, g, r),
                    "actions": available_actions(r),
                }
            )
        return rows

    @staticmethod
    def _governed_fleet(ctx: Context) -> list[Governed]:
        fleet = ctx.fleet()
        found = fleet.governed()
        unread = [p.cause for p in fleet.problems if p.cause is not None]
        if unread and not found:
            raise unread[0]  # nothing could be read at all: say why (502), rather than an empty fleet
        return found

    def fleet_page(self) -> dict[str, Any]:
        """The Fleet page: the summary strip, every cluster, and the week's events worth a flag. The
        governed clusters are read once for all of it."""
        ctx = self.context()
        now = ctx.now()
        month = self._month(ctx)
        found = self._governed_fleet(ctx)
        rows = self.fleet(month, ctx, found)
        return {
            "rows": rows,
            "summary": fleet_summary(ctx, rows, month, now, found),
            "week": self.week(ctx, rows, now),
            "as_of": now.isoformat(),
            "as_of_text": when(now),
            "paused": ctx.paused.line() if ctx.paused else None,
        }

    def week(self, ctx: Context, rows: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
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

    def _tonight(self, ctx: Context, g: Governed | None, r: StatusRow) -> dict[str, Any]:
        """What this cluster bills in its coming stopped stretch (tonight, or the weekend), and why."""
        now = ctx.now()
        if g is None:
            hourly = r.usd_per_hour
            why = "not governed: no schedule stops it" if r.state != "stopped" else "stopped by hand"
            return {"bills": bool(hourly), "usd": None, "usd_per_hour": hourly, "why": why, "from": None, "to": None}
        stretch = _stopped_stretch(g, now)
        zone = g.schedule.timezone
        if r.hold is not None and r.hold.state == "running":
            hourly = r.usd_per_hour
            until = f" until {when(r.hold.until, zone)}" if r.hold.until else " until released"
            return _bill(stretch, hourly, f"held running by {r.hold.by}{until}: everything bills")
        if stretch is None:
            return _bill(None, r.usd_per_hour, "the schedule does not stop it in the coming week")
        begin, end = stretch
        kept, why = self._kept_tonight(ctx, g, r)
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

    def _kept_tonight(self, ctx: Context, g: Governed, r: StatusRow) -> tuple[list[dict[str, Any]], str]:
        """The groups a stop would keep and why: from DescribeCluster and the policy, else from what the
        last stop kept."""
        prices = ctx.prices()
        view = self.describe_cached(ctx, g.ref)
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

    def cluster(self, name: str, start_text: str | None = None, viewer: tzinfo | None = None) -> dict[str, Any]:
        ctx = self.context()
        g, ref = self.target(ctx, name)
        now = ctx.now()
        r = status_row(ctx, g, ref.key)
        row = {**fleet_row_of(r, None, now), "actions": available_actions(r)}
        record = ctx.store.get(ref.key)
        groups: list[dict[str, Any]] = []
        protected: list[dict[str, Any]] = []
        describe_error = None
        policy = ref.settings.policy
        view = self.describe_cached(ctx, ref)
        created = None if isinstance(view, Exception) else truth.created_at(view.raw)
        if not isinstance(view, Exception):
            groups = [
                {
                    "group": v.name,
                    "instance_type": v.instance_type,
                    "current": v.current,
                    "target": v.target,
                    "status": v.status,
                }
                for v in view.groups
            ]
            protected = [
                {"group": p.group, "keep_at": p.keep_at, "reason": p.reason} for p in protections(view.groups, policy)
            ]
        else:
            describe_error = str(view)
            if record and record.snapshot:
                groups = [
                    {"group": n, "instance_type": s.instance_type, "current": None, "target": None, "status": None}
                    for n, s in record.snapshot.sizes.items()
                ]
        start = parse_instant(start_text, "from") if start_text else now - WINDOW_BACK
        end = start + WINDOW_BACK + WINDOW_AHEAD
        # The viewer's chosen zone (web/zones.py) when there is one, else the schedule's own.
        zone = viewer or (g.schedule.timezone if g is not None else None)
        history = ctx.store.history(ref.key, limit=500)
        kept = {p["group"] for p in protected if p["keep_at"] > 0}
        hold = r.hold
        rows = group_rows(
            [x["group"] for x in groups],
            history,
            g.schedule if g is not None else None,
            start,
            now,
            end,
            kept=kept,
            held=hold is not None,
            held_until=hold.until if hold is not None else None,
            since=created,
            stops_nothing=truth.stops_nothing(
                groups,
                protected,
                {n: s.count for n, s in record.snapshot.sizes.items()} if record and record.snapshot else {},
            ),
        )
        marks = markers(history, start, end)
        lead = ctx.lead_for(g) if g is not None else None
        used = {seg.kind for x in rows for seg in x.segments}
        return {
            **row,
            "governed": g is not None,
            "groups": groups,
            "protected_groups": protected,
            "describe_error": describe_error,
            "recorded_sizes": {n: s.count for n, s in record.snapshot.sizes.items()}
            if record and record.snapshot
            else {},
            "ready_by": {
                "enabled": bool(g is not None and g.schedule.ready_by),
                "lead_minutes": round(lead.lead.total_seconds() / 60, 1) if lead else 0.0,
                "why": lead.why if lead else "not governed: no schedule",
            },
            "timeline": {
                "from": start.isoformat(),
                "to": end.isoformat(),
                "now": now.isoformat(),
                "earlier": (start - WEEK).isoformat(),
                "later": (start + WEEK).isoformat(),
                "range_text": f"{when(start, zone)} to {when(end, zone)}",
                "legend": [{"kind": k, "label": LABELS[k]} for k in KINDS if k in used],
                "groups": [
                    {
                        "group": r.group,
                        "segments": [
                            {"from": s.start.isoformat(), "to": s.end.isoformat(), "kind": s.kind} for s in r.segments
                        ],
                    }
                    for r in rows
                ],
                "markers": [{"at": m.at.isoformat(), "kind": m.kind, "label": m.label} for m in marks],
                "created": created.isoformat() if created else None,
                "svg": timeline_svg(rows, start, end, now, marks, zone, since=created),
            },
            "history": [history_row(e, zone) for e in history[:50]],
            "checkpoint_audits": audits(history),
        }

    def preview(self, name: str, action: str) -> dict[str, Any]:
        """What a stop or start from the dashboard would do, group by group, and what it is worth per
        hour; read-only (DescribeCluster, the record, the policy, prices)."""
        ctx = self.context()
        _, ref = self.target(ctx, name)
        record = ctx.store.get(ref.key)
        out: dict[str, Any] = {"action": action, "groups": [], "nothing": None, "in_flight": None, "error": None}
        if record is not None and record.pending is not None:
            out["in_flight"] = f"a {record.pending.action} sent {when(record.pending.created_at)} is still settling"
        view = self.describe_cached(ctx, ref)
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
                change = (
                    f"stays at {after}: {p.reason}" if p is not None and after else ("to 0" if now_count else "at 0")
                )
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

    def savings(self, since_text: str | None = None, until_text: str | None = None) -> dict[str, Any]:
        ctx = self.context()
        until = parse_instant(until_text, "until") if until_text else ctx.now()
        since = parse_instant(since_text, "since") if since_text else until - timedelta(days=30)
        doc = summary.as_document(self.report(ctx, since, until))
        nights = doc["nightly"]
        cumulative, total = [], 0.0
        for n in nights:
            total += n["saving"]
            cumulative.append(round(total, 2))
        doc["cumulative_saving"] = cumulative
        doc["charts"] = savings_charts(nights, cumulative)
        return doc

    def schedules(self, tz: str | None) -> dict[str, Any]:
        zone = grids.viewer_zone(tz)
        ctx = self.context()
        now = ctx.now()
        governed = ctx.fleet().governed()
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
                    "releasable_usd_per_hour": round(_releasable(ctx, users.get(name, [])), 2),
                    "never_stopped": truth.never_stopped(
                        lambda g: self.describe_cached(ctx, g.ref), users.get(name, []), lambda g: _recorded(ctx, g)
                    ),
                }
            )
        return {"viewer_timezone": zone.key, "days": list(grids.day_names()), "schedules": out}

    # ---- writes ----------------------------------------------------------------------------------
    def save_schedule(self, name: str, grid: grids.Grid, token: str | None) -> dict[str, Any]:
        self.authorize(token)
        path = self.config_path
        if self.source is not None:  # never a local file that happens to be here: the workers read the table
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

    def act(
        self,
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
        self.authorize(token)
        ctx = self.context()
        try:
            return self._act(ctx, name, action, by, until, hold_state, reason)
        finally:
            if ctx is not self.fixed_context:
                ctx.close()  # a checkpoint channel a stop opened

    def approval(self, name: str, approval_id: str, token: str) -> dict[str, Any]:
        """What the confirm page shows for an approval link; the link's token is its only authority."""
        ctx = self.context()
        try:
            g = self.governed(ctx, name)
            key = (ctx.engine().accounts.known(g.ref) or g.ref).key
            record = ctx.store.get(key)
            try:
                a = approvals.find(record, approval_id)
                approvals.check(a, token, ctx.now())
                problem = ""
            except approvals.ApprovalError as exc:
                if "no such request" in str(exc):
                    raise NotFound(str(exc)) from None
                a, problem = approvals.find(record, approval_id), str(exc)
            return {
                "cluster": name,
                "id": a.id,
                "groups": a.groups,
                "stop": a.transition_at.isoformat(),
                "expires": a.expires_at.isoformat(),
                "state": a.state_at(ctx.now()),
                "by": a.by,
                "problem": problem,
                "timezone": getattr(g.schedule.timezone, "key", str(g.schedule.timezone)),
                "figures": approval_view.figures(
                    a.groups, self.describe_cached(ctx, g.ref), ctx.prices(), g.schedule, a.transition_at, a.expires_at
                ),
            }
        finally:
            if ctx is not self.fixed_context:
                ctx.close()

    def answer_approval(self, name: str, approval_id: str, token: str, approve: bool, by: str) -> dict[str, Any]:
        """Approve or refuse a release, once, before its stop; who answered goes into the history."""
        ctx = self.context()
        try:
            g = self.governed(ctx, name)
            key = (ctx.engine().accounts.known(g.ref) or g.ref).key
            try:
                a = approvals.decide(
                    ctx.store, key, approval_id, token, approve, clean(by, one_line=True)[:64], ctx.now()
                )
            except approvals.ApprovalError as exc:
                raise Refused(str(exc), 409) from None
            verb = "approved" if approve else "refused"
            return {
                "cluster": name,
                "id": a.id,
                "state": a.state,
                "by": a.by,
                "message": f"release of {', '.join(a.groups)} at {a.transition_at:%a %H:%M}Z {verb} by {a.by}",
            }
        finally:
            if ctx is not self.fixed_context:
                ctx.close()

    def _act(
        self, ctx: Context, name: str, action: ActionName, by: str, until: str | None, hold_state: str, reason: str
    ) -> dict[str, Any]:
        g = self.governed(ctx, name)
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
        preview = self.preview(name, action)
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
                    "to_zero": [x["group"] for x in preview["groups"] if x["after"] == 0 and (x["now"] or 0) > 0],
                    "stays": {x["group"]: x["after"] for x in preview["groups"] if x["after"]},
                },
            )
        )
        return {"cluster": name, "action": action, "kind": result.kind, "message": result.message, "by": who}


def history_row(e: HistoryEntry, zone: Any = None) -> dict[str, Any]:
    said = sentence(e)
    started = read_phases(e.detail)
    return {
        "at": e.at.isoformat(),
        "when": when(e.at),
        "local": when(e.at, zone) if zone is not None else "",
        "action": e.action,
        "actor": e.actor,
        "outcome": e.outcome,
        "duration_s": e.duration_s,
        "duration_text": duration(e.duration_s),
        "sentence": said.text,
        "tone": said.tone,
        "outcomes": [o.model_dump(mode="json") for o in said.outcomes],
        "detail": e.detail,
        "phases": {g: p.model_dump(mode="json") for g, p in started.items()},
    }


def audits(history: list[HistoryEntry]) -> list[dict[str, Any]]:
    """Every checkpoint-audit verdict the history carries (a blocked stop's, a drain's), newest first."""
    out = []
    for e in history:
        verdicts = [v for v in e.detail.get("verdicts") or [] if isinstance(v, dict)]
        old_style = any(k in e.detail for k in AUDIT_KEYS)
        if not verdicts and not old_style:
            continue
        for v in verdicts or [e.detail]:
            jobs = [j for j in v.get("jobs") or [] if isinstance(j, dict)]
            out.append(
                {
                    "at": e.at.isoformat(),
                    "when": when(e.at),
                    "action": e.action,
                    "outcome": e.outcome,
                    "guard": v.get("guard", "checkpoints"),
                    "decision": v.get("decision", e.outcome),
                    "reason": " ".join(str(v.get("reason") or e.detail.get("reason") or "").split()),
                    "jobs": [
                        {
                            "job": str(j.get("job_id", "")),
                            "name": str(j.get("name", "")),
                            "user": str(j.get("user", "")),
                            "location": str(j.get("location", "") or "-"),
                            "newest": str(j.get("newest") or "none"),
                        }
                        for j in jobs
                    ],
                }
            )
    return out


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


def _stopped_stretch(g: Governed, now: datetime) -> tuple[datetime, datetime] | None:
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


def _recorded(ctx: Any, g: Governed) -> dict[str, int]:
    """The sizes the cluster's record keeps (what a start restores), for ``truth.stops_nothing``."""
    record = ctx.store.get(g.ref.key)
    return {n: s.count for n, s in record.snapshot.sizes.items()} if record and record.snapshot else {}


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


def _releasable(ctx: Context, clusters: list[Governed]) -> float:
    """What the clusters on a schedule bill an hour while running, less what their stops keep: the
    figure a stopped hour saves (from recorded sizes; a cluster never stopped yet counts nothing)."""
    prices = ctx.prices()
    total = 0.0
    for g in clusters:
        record = ctx.store.get(g.ref.key)
        row = status_row(ctx, g)
        sizes = record.snapshot.sizes if record is not None and record.snapshot is not None else {}
        kept = {k.group: k.kept for k in row.protected}
        for group, size in sizes.items():
            price = prices.instance(size.instance_type) if size.instance_type else None
            if price is not None:
                total += price.usd * max(size.count - kept.get(group, 0), 0)
    return total


def _reason_short(reason: str) -> str:
    """The first clause of a protection's reason (``scarce capacity (ml.p5.48xlarge) ...``)."""
    text = reason.split(" is not released")[0].split(" stays up with")[0]
    if "Slurm" in reason and "stays up" in reason:
        return "the Slurm head stays up with the kept compute group"
    return text


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


__all__ = ["ACTIONS", "Dashboard", "NotFound", "Refused", "ref_for"]
