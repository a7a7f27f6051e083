"""The scheduler commands: stop, start, status, plan, tick, run (history, hold, release, claim and forget,
which act on a cluster's record, are in ``cli.records``).

Exit codes (docs/scheduler.md, "Exit codes"): 0 the action happened (or nothing was needed), 1 it was
refused, blocked or failed, 2 bad input (an unknown cluster, no config where one is needed), 3 nothing
was done because the cluster is not ready (Creating, Updating, ...; ``--wait`` waits for it instead),
130 interrupted (the line says whether an update had gone out).
"""

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
from rich.live import Live

from hyperpod_scheduler.app.status import KeptGroup, StatusRow, fleet_status, night_hours, state_text
from hyperpod_scheduler.app.wording import clock, countdown, iso_minute, usd
from hyperpod_scheduler.cli.context import Context, make_context, parse_instant, printer

# re-exported: the other command modules take them from here
from hyperpod_scheduler.cli.options import ConfigOpt as ConfigOpt
from hyperpod_scheduler.cli.options import JsonOpt as JsonOpt
from hyperpod_scheduler.cli.options import StateOpt as StateOpt
from hyperpod_scheduler.cli.output import (
    Column,
    Format,
    Listing,
    console,
    emit,
    error_line,
    is_terminal,
    nothing_due,
    output_format,
    output_option,
    print_json,
    rich_table,
    warning_line,
)
from hyperpod_scheduler.cli.refs import cluster_ref as _ref
from hyperpod_scheduler.cli.refs import not_found as _not_found
from hyperpod_scheduler.cli.status import status_listing
from hyperpod_scheduler.cli.waiting import AdaptivePoll, GroupLine, LiveWait, WaitView, retry_line
from hyperpod_scheduler.config.load import config_path, load_config
from hyperpod_scheduler.config.model import DEFAULT_CONFIG_FILE, Config
from hyperpod_scheduler.cost.savings import keep_cost_per_night
from hyperpod_scheduler.engine import fidelity
from hyperpod_scheduler.engine.approvals import DEFAULT_APPROVAL_MINUTES
from hyperpod_scheduler.engine.fleet import HORIZON, Governed, as_mapping, plan
from hyperpod_scheduler.engine.image_update import wanted as image_forecast
from hyperpod_scheduler.engine.images import line as image_line
from hyperpod_scheduler.engine.planner import Action
from hyperpod_scheduler.engine.runner import ClusterRef, Engine, Result
from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError
from hyperpod_scheduler.guards.approval import needs_approval
from hyperpod_scheduler.guards.capacity import head_warning, protections
from hyperpod_scheduler.inputs import args, bounded

DryRunOpt = typer.Option(False, "--dry-run", help="Show what would be sent; change nothing.")
RegionOpt = typer.Option(None, "--region", help="AWS region (default: from the config, else the AWS chain).")
ProfileOpt = typer.Option(None, "--profile", help="AWS profile.")
ClusterArg = typer.Argument(
    ...,
    metavar="CLUSTER",
    help="Cluster name.",
    show_default=False,
    callback=lambda value: args.cluster_name(value, "CLUSTER"),  # before it is looked up, stored or used
)

EXIT_FAILED, EXIT_USAGE, EXIT_NOT_READY, EXIT_INTERRUPTED = 1, 2, 3, 130
FAILED_KINDS = ("error", "failed", "refused", "blocked")


class NotReady(HyperpodSchedulerError):
    """Nothing was done: the cluster is Creating, Updating or otherwise busy."""

    exit_code = EXIT_NOT_READY


def _cluster_name(value: str) -> str:
    return args.cluster_name(value, "CLUSTER")


class ConfigWatch:
    """Notices edits of the config file between ticks (content, not timestamps: an edit within one
    second, or a copy that keeps the mtime, still counts)."""

    SETTLE_S = 0.2  # an editor's non-atomic save: the content must read the same twice this far apart

    def __init__(self, path: Path, pause: Callable[[float], None] = time.sleep) -> None:
        self.path = path
        self.pause = pause
        self.seen = self._read()

    def _read(self) -> bytes | None:
        try:  # bounded, and a regular file only: a FIFO swapped in for the config must not stop the loop
            return bounded.read_bytes(self.path)
        except bounded.BadDocument:
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


def _instant(option: str) -> Callable[[str | None], str | None]:
    """A callback that checks an instant argument as it is parsed (before any config is looked for)."""

    def check(value: str | None) -> str | None:
        if value:
            parse_instant(value, option)
        return value

    return check


def _needs_config(config: str | None, command: str) -> None:
    """``tick``, ``run`` and ``plan`` act on the config's clusters: without one there is nothing to do."""
    if config_path(config) is None:
        raise UsageError(
            f"{command}: no config file: pass -c FILE, set HYPERPOD_SCHEDULER_CONFIG, or create "
            "./hyperpod-scheduler.yaml (examples/hyperpod-scheduler.yaml shows every key)"
        )


def _governed(ctx: Context, config: str | None, command: str) -> list[Governed]:
    if not ctx.config.targets:
        raise UsageError(f"{command}: {config_path(config)} has no targets: it governs no cluster")
    governed = ctx.fleet().governed()
    for problem in ctx.fleet().problems:
        error_line(str(problem))
    return governed


def _exit_for(results: list[Result]) -> None:
    if any(r.kind in ("error", "failed", "refused") for r in results):
        raise typer.Exit(EXIT_FAILED)


def register(app: typer.Typer) -> None:
    @app.command()
    def stop(
        cluster: str = ClusterArg,
        region: str | None = RegionOpt,
        profile: str | None = ProfileOpt,
        wait: bool = typer.Option(
            False, "--wait", help="Wait until the cluster can be updated, then until every group is at 0."
        ),
        include_protected: bool = typer.Option(
            False, "--include-protected", help="Release protected groups (scarce capacity, keep policies) this once."
        ),
        dry_run: bool = DryRunOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Record every group's size, then scale every group to 0 in one UpdateCluster (protected groups stay).

        Exit 0 when sent (settled, with --wait) or already stopped; 1 refused, blocked or failed;
        3 the cluster is not ready (nothing sent; --wait waits for it).
        """
        _manual(cluster, "stop", region, profile, wait, dry_run, config, state, as_json, include_protected)

    @app.command()
    def start(
        cluster: str = ClusterArg,
        region: str | None = RegionOpt,
        profile: str | None = ProfileOpt,
        wait: bool = typer.Option(
            False, "--wait", help="Wait until the cluster can be updated, then until every group is restored."
        ),
        dry_run: bool = DryRunOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Restore every group to its recorded size in one UpdateCluster.

        Exit 0 when sent (settled, with --wait) or nothing was needed; 1 refused or failed (a start
        short of capacity included); 3 the cluster is not ready (nothing sent; --wait waits for it).
        """
        _manual(cluster, "start", region, profile, wait, dry_run, config, state, as_json)

    @app.command("tick")
    def tick_cmd(
        at: str | None = typer.Option(
            None, "--at", help="Evaluate schedules at this ISO instant instead of now.", callback=_instant("--at")
        ),
        dry_run: bool = DryRunOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
        output: str | None = output_option(),
    ) -> None:
        """One reconcile pass over every governed cluster (for cron). Exit 1 if any cluster failed."""
        fmt = output_format(output, as_json)
        _needs_config(config, "tick")
        ctx = make_context(config, state, fmt != "table" and fmt != "wide", at)
        governed = _governed(ctx, config, "tick")
        results = ctx.tick(governed, dry_run=dry_run)
        if fmt in ("json", "yaml"):
            emit(Listing([]), fmt, [r.__dict__ for r in results])
        elif not results:
            console.print("tick: no governed cluster was found (tag-selected targets found none)")
        elif all(r.kind in ("noop", "quiet") for r in results):
            console.print(nothing_due(ctx.now(), governed), markup=False)  # cron's log shows the pass ran
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
        _needs_config(config, "run")
        ctx = make_context(config, state, False)
        watch = ConfigWatch(config_path(config) or Path(DEFAULT_CONFIG_FILE))
        engine, count = ctx.engine(), 0
        if not ctx.config.targets:  # refused before the loop, as tick refuses it
            raise UsageError(f"run: {config_path(config)} has no targets: it governs no cluster")
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

    @app.command("plan")
    def plan_cmd(
        until: str | None = typer.Option(
            None, "--until", help="Plan up to this ISO instant (default: 7 days).", callback=_instant("--until")
        ),
        describe: bool = typer.Option(
            True, "--describe/--no-describe", help="Describe each cluster (read-only) to list protected groups."
        ),
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
        output: str | None = output_option(),
    ) -> None:
        """What would happen, and when, touching nothing."""
        fmt = output_format(output, as_json)
        _needs_config(config, "plan")
        ctx = make_context(config, state, fmt in ("json", "yaml"))
        now = ctx.now()
        end = parse_instant(until, "--until") if until else now + HORIZON
        governed = _governed(ctx, config, "plan")
        leads = {g.ref.key: ctx.lead_for(g) for g in governed if g.schedule.ready_by}
        steps = plan(governed, now, end, leads)
        guarded = [_protection_rows(ctx, g) for g in governed] if describe else []
        zones = {g.ref.name: g.schedule.timezone for g in governed}
        listing = Listing(
            [
                Column("when (UTC)", keep=True),
                Column("local"),
                Column("cluster", keep=True),
                Column("action", keep=True),
                Column("schedule", wide_only=True),
                Column("why"),
            ],
            [
                [iso_minute(s.at), clock(s.at, zones.get(s.cluster)), s.cluster, s.action, s.schedule, s.why]
                for s in steps
            ],
            title=f"plan {iso_minute(now)} .. {iso_minute(end)}",
            empty="no transitions in this window",
            notes=[line for row in guarded for line in _protection_lines(row)],
        )
        emit(listing, fmt, {"steps": as_mapping(steps), "clusters": guarded})


# ---- stop / start -----------------------------------------------------------------------------------


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
    poll = AdaptivePoll()
    view = WaitView(cluster, action)
    live = wait and not dry_run and not as_json and is_terminal()
    follower = LiveWait(view, poll, printer(as_json), live)
    ctx = make_context(config, state, as_json, events=follower, sleep=poll)
    ref = _ref(ctx, cluster, region, profile)
    engine = ctx.engine(include_protected=include_protected)
    poll_seconds = ctx.config.defaults.poll_seconds
    now = ctx.now()
    try:
        with follower:
            if wait and not dry_run:
                _wait_until_ready(ctx, engine, ref, view, poll, poll_seconds)
            result = engine.act(
                ref,
                action,
                transition_id=f"manual-{action}@{now.isoformat()}",
                reason="manual",
                dry_run=dry_run,
                wait=wait,
                poll_seconds=poll_seconds,
            )
    except KeyboardInterrupt:
        if view.sent:
            error_line(
                f"interrupted: the {action} of {cluster} was sent and goes on in AWS; `hyperpod-scheduler "
                f"{action} {cluster} --wait` follows it again, and the next tick records how it ended"
            )
        else:
            error_line(
                f"interrupted before AWS confirmed an update of {cluster}; the next {action} or tick looks at "
                "the cluster and carries on from what it finds"
            )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except ClientError as exc:
        if _not_found(exc):
            raise UsageError(f"{action}: cluster {cluster!r} not found in {ref.region}") from None
        raise
    if as_json:
        print_json(result.__dict__)
    elif live:
        console.print(f"{cluster}: {action} {result.kind} after {view.elapsed()}: {result.message}", markup=False)
    if result.kind in FAILED_KINDS:
        record = ctx.store.get(ref.key)
        if action == "start" and not dry_run and record is not None and record.retry is not None:
            console.print(retry_line(cluster, record.retry), markup=False)  # exit 1 says what sends the retry
        raise typer.Exit(EXIT_FAILED)
    if result.kind == "waiting":  # refused while deep health checks run; a command is not kept
        raise NotReady(f"{action} {cluster}: nothing sent: {result.message}")
    if result.kind == "skip":
        # Nothing was sent: a busy cluster, or another runner has it. Say what would have helped.
        hint = "" if wait else "; add --wait to wait for it"
        raise NotReady(f"{action} {cluster}: nothing sent: {result.message}{hint}")


def _wait_until_ready(
    ctx: Context, engine: Engine, ref: ClusterRef, view: WaitView, poll: AdaptivePoll, poll_seconds: float
) -> None:
    """``--wait`` on a cluster still Creating (or Updating for someone else) waits for it to settle first.
    An update of ours in flight is left to the engine, which follows it before acting."""
    record = ctx.store.get(ref.key)
    if record is not None and record.pending is not None:
        return
    deadline = time.monotonic() + ctx.config.defaults.settle_timeout_minutes * 60
    poll.reset()
    last = ""
    while True:
        cluster = engine.describe(ref)
        if cluster.status == "Failed":
            raise HyperpodSchedulerError(
                f"{view.action} {ref.name}: the cluster is Failed"
                + (f" ({cluster.failure_message})" if cluster.failure_message else "")
                + "; nothing can be sent"
            )
        for g in cluster.groups:
            line = view.groups.setdefault(g.name, GroupLine())
            line.current, line.target, line.status = g.current, g.target, g.status or ""
        if not cluster.busy:
            return
        reason = cluster.busy_reason()
        view.status = f"waiting: {reason}"
        if reason != last:
            poll.reset()
            if not is_terminal():
                console.print(f"{ref.name}: waiting before the {view.action}: {reason}")
            last = reason
        if time.monotonic() > deadline:
            raise NotReady(f"{view.action} {ref.name}: still not ready after the settle timeout: {reason}")
        poll(poll_seconds)


# ---- status -----------------------------------------------------------------------------------------


def _status_listing(ctx: Context, rows: list[StatusRow]) -> Listing:
    now = ctx.now()
    out = []
    for r in rows:
        nxt = r.next_transition
        zone = _zone(r.timezone)
        upcoming = f"{nxt[1]} {clock(nxt[0], zone)} ({countdown(nxt[0] - now)})" if nxt else "-"
        out.append(
            [
                r.cluster,
                state_text(r),
                r.schedule,
                upcoming,
                "; ".join(f.text for f in r.flags if f.kind != "kept") or "-",
                r.region or "-",
                "-" if r.usd_per_hour is None else f"{usd(r.usd_per_hour)}/h",
                ", ".join(f"{n}={c}" for n, c in r.recorded_sizes.items()) or "-",
                ", ".join(_kept_text(p) for p in r.protected) or "-",
                _outcome_text(r),
            ]
        )
    return status_listing(now, out, title=_status_title(now, rows))


def show_status(
    config: str | None, state: str | None, fmt: Format, watch: bool, interval: float, at: str | None = None
) -> None:
    """``status`` beyond "nothing configured" (cli.status answers that without this module)."""
    ctx = make_context(config, state, fmt in ("json", "yaml"), at)
    if ctx.paused is not None and fmt in ("table", "wide"):  # json/yaml: stays one document
        console.print(ctx.paused.line(), style="bold yellow", markup=False, highlight=False)
    if not watch:
        _print_status(ctx, fmt)
        return
    _watch_status(ctx, fmt, interval)


def _status_title(now: datetime, rows: list[StatusRow]) -> str:
    """Status reads the state store, not AWS: say how old the oldest record is rather than "as of now"
    (a cluster whose ticks failed, AWS unreachable, would otherwise read as live)."""
    dated = [r.recorded_at for r in rows if r.recorded_at is not None]
    if not dated:
        return f"hyperpod-scheduler status at {iso_minute(now)}: nothing recorded yet"
    oldest = min(dated)
    age = countdown(oldest - now)  # "5 min ago", or "now"
    return (
        f"hyperpod-scheduler status at {iso_minute(now)}: states as last recorded (oldest {iso_minute(oldest)}, {age})"
    )


def _print_status(ctx: Context, fmt: Format) -> None:
    rows = fleet_status(ctx)
    emit(_status_listing(ctx, rows), fmt, [r.document() for r in rows])


def _watch_status(ctx: Context, fmt: Format, interval: float) -> None:
    """Redraw until Ctrl-C (which ends a watch normally: exit 0). A pipe gets one table per interval."""
    try:
        if is_terminal() and fmt in ("table", "wide"):
            with Live(console=console, refresh_per_second=2, screen=False) as live:
                while True:
                    live.update(rich_table(_status_listing(ctx, fleet_status(ctx)), fmt))
                    time.sleep(interval)
        while True:
            _print_status(ctx, fmt)
            print(flush=True)
            time.sleep(interval)
    except KeyboardInterrupt:
        return


def _zone(name: str | None) -> Any:
    from hyperpod_scheduler.schedule.clock import zone  # the one zone rule: never an OSError for a folder

    return zone(name) if name else None


# ---- plan -------------------------------------------------------------------------------------------


def _protection_rows(ctx: Context, g: Governed) -> dict[str, Any]:
    """Which groups a stop would keep and why, read with DescribeCluster (nothing is changed)."""
    row: dict[str, Any] = {"cluster": g.ref.name, "protected": [], "warnings": []}
    try:
        view = ctx.engine().describe(g.ref)
    except (ClientError, BotoCoreError, HyperpodSchedulerError) as exc:
        row["error"] = str(exc)
        return row
    from hyperpod_scheduler.engine.slurm_roles import remembered_roles

    view = remembered_roles(view, ctx.store.get(g.ref.key), ctx.now())  # roles learned from the file
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
    kept = {p.group for p in protections(view.groups, g.policy)}
    moves = image_forecast(ctx.engine(), g.ref, ctx.store.get(g.ref.key), view, {x.name for x in view.groups} - kept)
    row["image_updates"] = [u.model_dump() for u in moves]
    if moves:
        row["warnings"].append(f"the next start first moves AMI releases while at zero: {image_line(moves)}")
    needing = needs_approval(view, g.policy)
    if needing:
        minutes = g.policy.approval_minutes or DEFAULT_APPROVAL_MINUTES
        row["warnings"].append(
            f"a scheduled stop releases {', '.join(needing)} only with a person's approval (asked {minutes:g} min "
            "before the stop; no answer keeps them)"
        )
    row["refused"] = fidelity.refusal(view, g.policy)
    return row


def _protection_lines(row: dict[str, Any]) -> list[str]:
    lines = []
    for p in row["protected"]:
        cost = p["keep_cost_per_night_usd"]
        priced = f" (about {usd(cost, cents=False)} per {row['night_hours']:.0f} h night)" if cost is not None else ""
        lines.append(f"{row['cluster']} keeps {p['group']} at {p['keep_at']}{priced}: {p['reason']}")
    lines.extend(f"{row['cluster']}: {w}" for w in row["warnings"])
    if row.get("error"):
        lines.append(f"{row['cluster']}: cannot describe: {row['error']}")
    if row.get("refused"):
        lines.append(f"{row['cluster']}: no stop or start will be sent: {row['refused']}")
    return lines


def _kept_text(p: KeptGroup) -> str:
    cost = p.keep_cost_per_night_usd
    return f"{p.group}={p.kept}" + (f" ({usd(cost, cents=False)}/night)" if cost else "")


def _outcome_text(r: StatusRow) -> str:
    groups = ", ".join(f"{o.group} {o.outcome} {o.current}/{o.target}" for o in r.last_outcomes)
    attention = [f"{r.refused.action} refused: {r.refused.reason}"] if r.refused else []
    attention.extend(fidelity.describe_changes([c]) for c in r.ami_changes)
    return "; ".join([groups, *attention]).strip("; ") or "-"


__all__ = ["EXIT_NOT_READY", "UTC", "NotReady", "datetime", "register", "timedelta", "warning_line"]
