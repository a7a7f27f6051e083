"""What the dashboard shows and does, as plain dicts (the JSON API returns them; the pages render them).

The shell around the library: config, state store, clock and AWS clients come from a ``Dashboard``;
every figure comes from the same functions the CLI uses (fleet, schedule, cost, guards, engine).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.app import report as reports
from hyperpod_scheduler.app.compose import Context, chain_clients
from hyperpod_scheduler.app.instants import parse_instant
from hyperpod_scheduler.app.status import status_row
from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.config.load import config_path, load_config
from hyperpod_scheduler.cost import summary
from hyperpod_scheduler.cost.fsx import FileSystem
from hyperpod_scheduler.cost.savings import Report
from hyperpod_scheduler.cost.settings import CostSettings
from hyperpod_scheduler.engine import approvals
from hyperpod_scheduler.engine.fleet import Governed, ref_for
from hyperpod_scheduler.engine.phases import summary as phase_summary
from hyperpod_scheduler.engine.runner import ClusterRef
from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError
from hyperpod_scheduler.guards.capacity import protections
from hyperpod_scheduler.inputs.text import clean
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.store.outcomes import read_phases
from hyperpod_scheduler.store.records import HistoryEntry
from hyperpod_scheduler.web import grid as grids
from hyperpod_scheduler.web.config_edit import read_document, write_schedule
from hyperpod_scheduler.web.svg import bars_svg, timeline_svg
from hyperpod_scheduler.web.timeline import group_rows

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from hyperpod_scheduler.store.base import StateStore

AUDIT_KEYS = ("jobs", "signalled", "drained", "requeued", "resubmit", "checkpoint", "checkpoints", "audit")
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
    _store: StateStore | None = None
    # FSx discovery is several AWS calls per cluster; file systems rarely change, so a recent answer
    # is reused rather than paid for on every page view.
    _fsx_cache: dict[tuple[str, ...], tuple[float, dict[str, list[FileSystem]], list[str]]] = field(
        default_factory=dict
    )

    @property
    def read_only(self) -> bool:
        return not self.token

    @property
    def config_path(self) -> Path | None:
        return config_path(self.config_file)

    def store(self) -> StateStore:
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

    def fleet(self) -> list[dict[str, Any]]:
        ctx = self.context()
        now = ctx.now()
        month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        doc = summary.as_document(self.report(ctx, month, now)) if now > month else {"clusters": []}
        saved = {c["key"]: c["window"]["saving"] for c in doc["clusters"]}
        fleet = ctx.fleet()
        governed = fleet.governed()
        unread = [p.cause for p in fleet.problems if p.cause is not None]
        if unread and not governed:
            raise unread[0]  # nothing could be read at all: say why (502), rather than an empty fleet
        return [fleet_row(ctx, g, saved.get(g.ref.key, 0.0)) for g in governed]

    def cluster(self, name: str) -> dict[str, Any]:
        ctx = self.context()
        g = self.governed(ctx, name)
        now = ctx.now()
        row = fleet_row(ctx, g, None)
        record = ctx.store.get(g.ref.key)
        groups: list[dict[str, Any]] = []
        protected: list[dict[str, Any]] = []
        describe_error = None
        try:
            view = ctx.engine().describe(g.ref)
            groups = [
                {"group": v.name, "instance_type": v.instance_type, "current": v.current, "target": v.target}
                for v in view.groups
            ]
            protected = [
                {"group": p.group, "keep_at": p.keep_at, "reason": p.reason} for p in protections(view.groups, g.policy)
            ]
        except (ClientError, BotoCoreError, HyperpodSchedulerError) as exc:
            describe_error = str(exc)
            if record and record.snapshot:
                groups = [
                    {"group": n, "instance_type": s.instance_type, "current": None, "target": None}
                    for n, s in record.snapshot.sizes.items()
                ]
        start, end = now - timedelta(days=4), now + timedelta(days=3)
        history = ctx.store.history(g.ref.key, limit=500)
        rows = group_rows([x["group"] for x in groups], history, g.schedule, start, now, end)
        lead = ctx.lead_for(g)
        return {
            **row,
            "groups": groups,
            "protected_groups": protected,
            "describe_error": describe_error,
            "recorded_sizes": {n: s.count for n, s in record.snapshot.sizes.items()}
            if record and record.snapshot
            else {},
            "ready_by": {
                "enabled": g.schedule.ready_by,
                "lead_minutes": round(lead.lead.total_seconds() / 60, 1),
                "why": lead.why,
            },
            "timeline": {
                "from": start.isoformat(),
                "to": end.isoformat(),
                "now": now.isoformat(),
                "groups": [
                    {
                        "group": r.group,
                        "segments": [
                            {"from": s.start.isoformat(), "to": s.end.isoformat(), "kind": s.kind} for s in r.segments
                        ],
                    }
                    for r in rows
                ],
                "svg": timeline_svg(rows, start, end, now),
            },
            "history": [history_row(e) for e in history[:50]],
            "checkpoint_audits": [history_row(e) for e in history if any(k in e.detail for k in AUDIT_KEYS)],
        }

    def savings(self, since_text: str | None = None, until_text: str | None = None) -> dict[str, Any]:
        ctx = self.context()
        until = parse_instant(until_text, "until") if until_text else ctx.now()
        since = parse_instant(since_text, "since") if since_text else until - timedelta(days=30)
        doc = summary.as_document(self.report(ctx, since, until))
        nights = doc["nightly"]
        labels = [n["night"] for n in nights]
        cumulative, total = [], 0.0
        for n in nights:
            total += n["saving"]
            cumulative.append(round(total, 2))
        doc["cumulative_saving"] = cumulative
        doc["charts"] = {
            "per_night": bars_svg(
                labels,
                [
                    ("saving (instance cost avoided)", "#2f855a", [n["saving"] for n in nights]),
                    ("FSx still billing while stopped", "#dd6b20", [n["fsx_while_stopped"] for n in nights]),
                    ("kept (not saved)", "#718096", [n["kept_cost"] for n in nights]),
                ],
                "per night (USD)",
            ),
            "cumulative": bars_svg(labels, [("cumulative saving", "#2b6cb0", cumulative)], "cumulative (USD)"),
        }
        return doc

    def schedules(self, tz: str | None) -> dict[str, Any]:
        zone = grids.viewer_zone(tz)
        ctx = self.context()
        now = ctx.now()
        used = {g.schedule_label for g in ctx.fleet().governed()}
        out = []
        for name, value in ctx.config.schedules.items():
            pattern = grids.pattern_of(name, value)
            own = pattern.timezone
            entry = grids.entry_mapping(value)
            out.append(
                {
                    "name": name,
                    "expression": pattern.expression,
                    "timezone": own.key,
                    "holidays": list(entry.get("holidays") or [])
                    if not isinstance(entry.get("holidays"), str)
                    else [entry["holidays"]],
                    "skip_dates": [str(d) for d in entry.get("skip_dates") or []],
                    "mode": pattern.mode,
                    "in_use": name in used,
                    "grid": grids.grid_for(pattern, own, grids.week_monday(now, own)),
                    "viewer_grid": grids.grid_for(pattern, zone, grids.week_monday(now, zone)),
                }
            )
        return {"viewer_timezone": zone.key, "days": list(grids.day_names()), "schedules": out}

    # ---- writes ----------------------------------------------------------------------------------
    def save_schedule(self, name: str, grid: grids.Grid, token: str | None) -> dict[str, Any]:
        self.authorize(token)
        path = self.config_path
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
        result = engine.act(g.ref, action, transition_id=f"dashboard-{action}@{now.isoformat()}", reason="dashboard")
        # The engine writes history when an update settles (possibly on a later tick, by the
        # scheduler); this line records who asked, at once.
        ctx.store.append_history(
            HistoryEntry(
                key=g.ref.key,
                at=now,
                action=f"manual-{action}",
                actor=who,
                outcome=result.kind,
                detail={"message": result.message, "reason": reason or "dashboard"},
            )
        )
        return {"cluster": name, "action": action, "kind": result.kind, "message": result.message, "by": who}


def history_row(e: HistoryEntry) -> dict[str, Any]:
    detail = dict(e.detail)
    started = read_phases(e.detail)
    if started:  # the phases read as one line; the typed values stay in "phases"
        detail["phases"] = phase_summary(started)
    return {
        "at": e.at.isoformat(),
        "action": e.action,
        "actor": e.actor,
        "outcome": e.outcome,
        "duration_s": e.duration_s,
        "duration_text": "" if e.duration_s is None else f"{e.duration_s / 60:.1f} min",
        "detail": detail,
        "phases": {g: p.model_dump(mode="json") for g, p in started.items()},
    }


def fleet_row(ctx: Context, g: Governed, month_saving: float | None) -> dict[str, Any]:
    """One fleet line: the status row ``status`` prints, and this month's saving."""
    return {
        **status_row(ctx, g).document(),
        "month_saving_usd": None if month_saving is None else round(month_saving, 2),
    }


__all__ = ["ACTIONS", "Dashboard", "NotFound", "Refused", "ref_for"]
