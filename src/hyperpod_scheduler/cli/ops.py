"""The scheduler commands: stop, start, status, plan, tick, run, history, hold, release."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import typer
from botocore.exceptions import BotoCoreError, ClientError
from rich.markup import escape
from rich.table import Table

from hyperpod_scheduler.app.status import KeptGroup, StatusRow, fleet_status, night_hours, state_text
from hyperpod_scheduler.cli.context import Context, make_context, parse_instant
from hyperpod_scheduler.cli.output import console, error_line, print_json
from hyperpod_scheduler.config.load import config_path, load_config
from hyperpod_scheduler.config.model import DEFAULT_CONFIG_FILE, SCHEDULE_TAG, Config
from hyperpod_scheduler.cost.savings import keep_cost_per_night
from hyperpod_scheduler.engine import fidelity
from hyperpod_scheduler.engine.approvals import DEFAULT_APPROVAL_MINUTES
from hyperpod_scheduler.engine.fleet import HORIZON, Governed, as_mapping, plan, ref_for
from hyperpod_scheduler.engine.identity import reach_of
from hyperpod_scheduler.engine.phases import summary as phase_summary
from hyperpod_scheduler.engine.planner import Action
from hyperpod_scheduler.engine.runner import ClusterRef, Result
from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError
from hyperpod_scheduler.guards.approval import needs_approval
from hyperpod_scheduler.guards.capacity import head_warning, protections
from hyperpod_scheduler.inputs import args
from hyperpod_scheduler.store.outcomes import read_phases

ConfigOpt = typer.Option(None, "--config", "-c", help="Config file (default: ./hyperpod-scheduler.yaml if present).")
StateOpt = typer.Option(
    None, "--state", help="State store: a SQLite path, sqlite:///path, dynamodb://TABLE?region=R, or memory:."
)
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON.")
DryRunOpt = typer.Option(False, "--dry-run", help="Show what would be sent; change nothing.")
RegionOpt = typer.Option(None, "--region", help="AWS region (default: from the config, else the AWS chain).")
ProfileOpt = typer.Option(None, "--profile", help="AWS profile.")


def _cluster_name(value: str) -> str:
    return args.cluster_name(value, "CLUSTER")


def _ref(ctx: Context, name: str, region: str | None, profile: str | None) -> ClusterRef:
    args.cluster_name(name)  # before it is looked up, stored or used as a key
    governed = ctx.fleet().find(name, region, profile) if ctx.config.targets else None
    if governed is not None:
        return governed.ref
    ref = ref_for(name, region, profile)
    account = ctx.store.account_for(reach_of(ref))  # so a face reads the record where the engine keeps it
    return ref.with_account(account) if account is not None else ref


class ConfigWatch:
    """Notices edits of the config file between ticks (content, not timestamps: an edit within one
    second, or a copy that keeps the mtime, still counts)."""

    SETTLE_S = 0.2  # an editor's non-atomic save: the content must read the same twice this far apart

    def __init__(self, path: Path, pause: Callable[[float], None] = time.sleep) -> None:
        self.path = path
        self.pause = pause
        self.seen = self._read()

    def _read(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except OSError:
            return None

    def changed(self, current: Config) -> Config | None:
        """The new config if the file changed and parses; None otherwise (a broken edit is reported
        once, and the config in force stays; a file caught mid-save is looked at again next tick)."""
        now = self._read()
        if now == self.seen:
            return None
        self.pause(self.SETTLE_S)
        if self._read() != now:
            return None  # still being written
        self.seen = now
        if now is None:
            error_line(f"config {self.path}: cannot be read any more; keeping the last good config")
            return None
        try:
            config = load_config(self.path)
        except HyperpodSchedulerError as exc:
            error_line(f"{exc}; keeping the last good config")
            return None
        if (config.state, config.notifications) != (current.state, current.notifications):
            error_line(f"config {self.path}: `state` and `notifications` changes take effect when run restarts")
        console.print(f"run: config {self.path} changed; following it from this tick", highlight=False)
        return config


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """SIGTERM and SIGINT end the loop after the pass in progress; a second one stops at once."""
    stopping = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stopping  # signals are only delivered to the main thread
        return

    def on_signal(signum: int, _frame: object) -> None:
        if stopping.is_set():
            raise KeyboardInterrupt
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stopping
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        return f"{err.get('Code', 'Error')}: {err.get('Message', '')}"
    text = str(exc) if isinstance(exc, HyperpodSchedulerError | BotoCoreError) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())


def _exit_for(results: list[Result]) -> None:
    if any(r.kind in ("error", "failed", "refused") for r in results):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    @app.command()
    def stop(
        cluster: str = typer.Argument(..., help="Cluster name.", callback=_cluster_name),
        region: str | None = RegionOpt,
        profile: str | None = ProfileOpt,
        wait: bool = typer.Option(False, "--wait", help="Follow the cluster until every group is at 0."),
        include_protected: bool = typer.Option(
            False, "--include-protected", help="Release protected groups (scarce capacity, keep policies) this once."
        ),
        dry_run: bool = DryRunOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Record every group's size, then scale every group to 0 in one UpdateCluster (protected groups stay)."""
        _manual(cluster, "stop", region, profile, wait, dry_run, config, state, as_json, include_protected)

    @app.command()
    def start(
        cluster: str = typer.Argument(..., help="Cluster name.", callback=_cluster_name),
        region: str | None = RegionOpt,
        profile: str | None = ProfileOpt,
        wait: bool = typer.Option(False, "--wait", help="Follow the cluster until every group is restored."),
        dry_run: bool = DryRunOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Restore every group to its recorded size in one UpdateCluster."""
        _manual(cluster, "start", region, profile, wait, dry_run, config, state, as_json)

    @app.command("tick")
    def tick_cmd(
        at: str | None = typer.Option(None, "--at", help="Evaluate schedules at this ISO instant instead of now."),
        dry_run: bool = DryRunOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """One reconcile pass over every governed cluster (for cron)."""
        ctx = make_context(config, state, as_json, at)
        governed = ctx.fleet().governed()
        for problem in ctx.fleet().problems:
            error_line(str(problem))
        results = ctx.tick(governed, dry_run=dry_run)
        if as_json:
            print_json([r.__dict__ for r in results])
        _exit_for(results)
        if ctx.fleet().problems:
            raise typer.Exit(1)  # a target or cluster was left out: cron should see it

    @app.command()
    def run(
        interval: float = typer.Option(
            60.0, "--interval", help="Seconds between ticks.", callback=lambda v: args.seconds(v, "--interval")
        ),
        ticks: int = typer.Option(0, "--ticks", min=0, help="Stop after N ticks (0: run until interrupted)."),
        dry_run: bool = DryRunOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
    ) -> None:
        """The long-running loop: tick every --interval seconds, following edits of the config file.

        A broken edit is reported and the last good config stays in force; SIGTERM or Ctrl-C ends the
        loop after the current pass."""
        ctx = make_context(config, state, False)
        watch = ConfigWatch(config_path(config) or Path(DEFAULT_CONFIG_FILE))
        engine, count = ctx.engine(), 0
        with _stop_on_signals() as stopping:
            while not stopping.is_set():
                reloaded = watch.changed(ctx.config)
                if reloaded is not None:
                    ctx = ctx.reconfigured(reloaded)
                    engine = ctx.engine()
                try:
                    fleet = ctx.fleet()
                    governed = fleet.governed()
                    for problem in fleet.problems:
                        error_line(str(problem))
                    ctx.tick(governed, dry_run=dry_run, engine=engine)
                except Exception as exc:  # the loop outlives any one pass: the next tick tries again
                    error_line(f"tick failed: {_one_line(exc)}; the next tick tries again")
                count += 1
                if ticks and count >= ticks:
                    return
                stopping.wait(interval)
        console.print("run: stopped by a signal after the pass in progress", highlight=False)

    @app.command()
    def status(
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """A table of governed clusters: schedule, state, recorded sizes, next transition, last outcome."""
        ctx = make_context(config, state, as_json)
        rows = fleet_status(ctx)
        if as_json:
            print_json([r.document() for r in rows])
            return
        table = Table(title="hyperpod-scheduler status")
        for col in ("cluster", "schedule", "state", "recorded sizes", "protected", "next transition", "last outcome"):
            table.add_column(col)
        for r in rows:
            table.add_row(
                r.cluster,
                r.schedule,
                state_text(r),
                ", ".join(f"{n}={c}" for n, c in r.recorded_sizes.items()) or "-",
                ", ".join(_kept_text(p) for p in r.protected) or "-",
                _next_text(r.next_transition),
                escape(_outcome_text(r)),
            )
        console.print(table)
        if not rows:
            # An empty table alone reads as "broken"; say what makes a cluster show up.
            console.print(
                f"no clusters: none is named in the config or tagged {SCHEDULE_TAG}=<schedule> in a target "
                "with tag_selector: true, and the state store has none from a manual stop or start"
            )

    @app.command("plan")
    def plan_cmd(
        until: str | None = typer.Option(None, "--until", help="Plan up to this ISO instant (default: 7 days)."),
        describe: bool = typer.Option(
            True, "--describe/--no-describe", help="Describe each cluster (read-only) to list protected groups."
        ),
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """What would happen, and when, touching nothing."""
        ctx = make_context(config, state, as_json)
        now = ctx.now()
        end = parse_instant(until, "--until") if until else now + HORIZON
        governed = ctx.fleet().governed()
        leads = {g.ref.key: ctx.lead_for(g) for g in governed if g.schedule.ready_by}
        steps = plan(governed, now, end, leads)
        guarded = [_protection_rows(ctx, g) for g in governed] if describe else []
        if as_json:
            print_json({"steps": as_mapping(steps), "clusters": guarded})
            return
        table = Table(title=f"plan {now:%Y-%m-%d %H:%M}Z .. {end:%Y-%m-%d %H:%M}Z")
        for col in ("when (UTC)", "cluster", "action", "schedule", "why"):
            table.add_column(col)
        for s in steps:
            table.add_row(f"{s.at.astimezone(UTC):%a %Y-%m-%d %H:%M}", s.cluster, s.action, s.schedule, s.why)
        console.print(table)
        for row in guarded:
            for p in row["protected"]:
                cost = p["keep_cost_per_night_usd"]
                priced = f" (about ${cost:,.0f} per {row['night_hours']:.0f} h night)" if cost is not None else ""
                console.print(
                    f"[bold]{escape(row['cluster'])}[/] keeps [bold]{escape(p['group'])}[/] at {p['keep_at']}{priced}: "
                    + escape(p["reason"])
                )
            for warning in row["warnings"]:
                console.print(f"[yellow]{escape(row['cluster'])}: {escape(warning)}[/]")
            if row.get("error"):
                console.print(f"[red]{escape(row['cluster'])}: cannot describe: {escape(row['error'])}[/]")
            if row.get("refused"):
                console.print(f"[red]{row['cluster']}: no stop or start will be sent: {escape(row['refused'])}[/]")

    @app.command()
    def history(
        cluster: str = typer.Argument(..., help="Cluster name.", callback=_cluster_name),
        region: str | None = RegionOpt,
        limit: int = typer.Option(20, "--limit", min=1),
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """The actions taken on a cluster, newest first, with timings."""
        ctx = make_context(config, state, as_json)
        ref = _ref(ctx, cluster, region, None)
        entries = ctx.store.history(ref.key, limit=limit)
        if as_json:
            print_json([e.model_dump(mode="json") for e in entries])
            return
        table = Table(title=f"history of {cluster}")
        for col in ("at (UTC)", "action", "actor", "outcome", "duration", "detail"):
            table.add_column(col)
        for e in entries:
            dur = "" if e.duration_s is None else f"{e.duration_s / 60:.1f} min"
            detail = dict(e.detail)
            if started := read_phases(e.detail):
                detail["phases"] = phase_summary(started)
            table.add_row(
                f"{e.at.astimezone(UTC):%Y-%m-%d %H:%M}",
                e.action,
                e.actor,
                e.outcome,
                dur,
                escape(", ".join(f"{k}={v}" for k, v in detail.items())),
            )
        console.print(table)

    @app.command()
    def hold(
        cluster: str = typer.Argument(..., help="Cluster name.", callback=_cluster_name),
        until: str | None = typer.Option(None, "--until", help="ISO instant the hold ends (default: until released)."),
        hold_state: str = typer.Option("running", "--state-wanted", help="Keep the cluster 'running' or 'stopped'."),
        reason: str = typer.Option("", "--reason"),
        region: str | None = RegionOpt,
        dry_run: bool = DryRunOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
    ) -> None:
        """Override the schedule: keep a cluster running (or stopped) until a time or until released."""
        if hold_state not in ("running", "stopped"):
            raise UsageError(f"--state-wanted: {hold_state!r} is not 'running' or 'stopped'")
        ctx = make_context(config, state, False)
        end = parse_instant(until, "--until") if until else None
        ref = _ref(ctx, cluster, region, None)
        if dry_run:
            console.print(f"{cluster}: would hold {hold_state}" + (f" until {end.isoformat()}" if end else ""))
            return
        ctx.engine().set_hold(ref, hold_state, end, reason)  # type: ignore[arg-type]
        console.print(f"{cluster}: held {hold_state}" + (f" until {end.isoformat()}" if end else " until released"))

    @app.command()
    def release(
        cluster: str = typer.Argument(..., help="Cluster name.", callback=_cluster_name),
        region: str | None = RegionOpt,
        dry_run: bool = DryRunOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
    ) -> None:
        """End a hold; the next tick applies what the schedule wants."""
        ctx = make_context(config, state, False)
        if dry_run:
            record = ctx.store.get(_ref(ctx, cluster, region, None).key)
            console.print(f"{cluster}: " + ("would release the hold" if record and record.hold else "no hold"))
            return
        released = ctx.engine().release(_ref(ctx, cluster, region, None))
        console.print(f"{cluster}: " + ("released" if released else "no hold to release"))

    @app.command()
    def claim(
        cluster: str = typer.Argument(..., help="Cluster name."),
        region: str | None = RegionOpt,
        profile: str | None = ProfileOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
    ) -> None:
        """Say whose cluster this is: remember the account this profile reaches now for it (replacing an
        earlier one), and give it the record kept from before account keys, if one is waiting."""
        ctx = make_context(config, state, False)
        ref = _ref(ctx, cluster, region, profile)
        console.print(ctx.engine().claim(ref), highlight=False)


def _manual(
    cluster: str,
    action: Action,
    region: str | None,
    profile: str | None,
    wait: bool,
    dry_run: bool,
    config: str | None,
    state: str | None,
    as_json: bool,
    include_protected: bool = False,
) -> None:
    ctx = make_context(config, state, as_json)
    ref = _ref(ctx, cluster, region, profile)
    now = ctx.now()
    poll = ctx.config.defaults.poll_seconds
    result = ctx.engine(include_protected=include_protected).act(
        ref,
        action,
        transition_id=f"manual-{action}@{now.isoformat()}",
        reason="manual",
        dry_run=dry_run,
        wait=wait,
        poll_seconds=poll,
    )
    if as_json:
        print_json(result.__dict__)
    _exit_for([result])


def _protection_rows(ctx: Context, g: Governed) -> dict[str, Any]:
    """Which groups a stop would keep and why, read with DescribeCluster (nothing is changed)."""
    row: dict[str, Any] = {"cluster": g.ref.name, "protected": [], "warnings": []}
    try:
        view = ctx.engine().describe(g.ref)
    except (ClientError, BotoCoreError, HyperpodSchedulerError) as exc:
        row["error"] = str(exc)
        return row
    hours = night_hours(g.schedule, ctx.now())
    row["night_hours"] = hours
    row["protected"] = []
    for p in protections(view.groups, g.policy):
        itype = (view.group(p.group) or view.groups[0]).instance_type
        cost = keep_cost_per_night(itype, p.keep_at, hours, ctx.prices()) if itype and hours else None
        row["protected"].append(
            {
                "group": p.group,
                "keep_at": p.keep_at,
                "instance_type": itype,
                "reason": p.reason,
                "overridable": p.overridable,
                "keep_cost_per_night_usd": None if cost is None else round(cost, 2),
            }
        )
    warning = head_warning(view.groups, g.policy)
    if warning:
        row["warnings"].append(warning)
    needing = needs_approval(view, g.policy)
    if needing:
        minutes = g.policy.approval_minutes or DEFAULT_APPROVAL_MINUTES
        row["warnings"].append(
            f"a scheduled stop releases {', '.join(needing)} only with a person's approval (asked {minutes:g} min "
            "before the stop; no answer keeps them)"
        )
    row["refused"] = fidelity.refusal(view, g.policy)
    return row


def _next_text(nxt: tuple[datetime, str] | None) -> str:
    return f"{nxt[1]} at {nxt[0].astimezone(UTC):%a %H:%M}Z" if nxt else "-"


def _kept_text(p: KeptGroup) -> str:
    cost = p.keep_cost_per_night_usd
    return f"{p.group}={p.kept}" + (f" (${cost:,.0f}/night)" if cost else "")


def _outcome_text(r: StatusRow) -> str:
    groups = ", ".join(f"{o.group} {o.outcome} {o.current}/{o.target}" for o in r.last_outcomes)
    attention = [f"{r.refused.action} refused: {r.refused.reason}"] if r.refused else []
    attention.extend(fidelity.describe_changes([c]) for c in r.ami_changes)
    return "; ".join([groups, *attention]).strip("; ") or "-"


__all__ = ["datetime", "register", "timedelta"]
