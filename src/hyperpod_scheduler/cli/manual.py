"""``stop`` and ``start``: a person's action on one cluster, now, optionally followed to the end
(``--wait``). Exit codes: ``cli.exits``."""

from __future__ import annotations

import time

import typer
from botocore.exceptions import ClientError

from hyperpod_scheduler.app import outcomes
from hyperpod_scheduler.app.actions import act_now
from hyperpod_scheduler.cli.context import Context, make_context, printer
from hyperpod_scheduler.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, NotReady
from hyperpod_scheduler.cli.options import (
    ClusterArg,
    ConfigOpt,
    DryRunOpt,
    JsonOpt,
    ProfileOpt,
    RegionOpt,
    StateOpt,
)
from hyperpod_scheduler.cli.output import console, error_line, is_terminal, print_json
from hyperpod_scheduler.cli.refs import cluster_ref as _ref
from hyperpod_scheduler.cli.refs import not_found as _not_found
from hyperpod_scheduler.cli.waiting import AdaptivePoll, GroupLine, LiveWait, WaitView, retry_line
from hyperpod_scheduler.engine.planner import Action
from hyperpod_scheduler.engine.runner import ClusterRef, Engine
from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError


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
        3 the cluster is not ready or a stop is already under way (nothing sent; --wait waits for it,
        or follows the stop under way to its end).
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
        short of capacity included); 3 the cluster is not ready or a start is already under way
        (nothing sent; --wait waits for it, or follows the start under way to its end).
        """
        _manual(cluster, "start", region, profile, wait, dry_run, config, state, as_json)


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
            result = act_now(
                engine, ref, action, now, source="manual", reason="manual", dry_run=dry_run, wait=wait,
                poll_seconds=poll_seconds,
            )  # fmt: skip
    except KeyboardInterrupt:
        if view.sent:
            error_line(
                f"interrupted: the {action} of {cluster} was sent and goes on in AWS; "
                f"{ref.command(action, '--wait')} follows it again, and the next tick records how it ended"
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
    code = outcomes.manual_exit(result.kind)  # the app's mapping, the one the proof suite judges by
    if code == EXIT_FAILED:
        record = ctx.store.get(ref.key)
        if action == "start" and not dry_run and record is not None and record.retry is not None:
            console.print(retry_line(ref, record.retry), markup=False)  # exit 1 says what sends the retry
        raise typer.Exit(EXIT_FAILED)
    if code != outcomes.EXIT_OK:
        # Nothing was sent: a busy cluster, an update of this kind already under way, another runner,
        # deep health checks running (a command is not kept). Say what would have helped.
        hint = "" if wait or result.kind == "waiting" else "; add --wait to wait for it"
        raise NotReady(f"{action} {cluster}: nothing sent: {result.message}{hint}")


def _wait_until_ready(
    ctx: Context, engine: Engine, ref: ClusterRef, view: WaitView, poll: AdaptivePoll, poll_seconds: float
) -> None:
    """``--wait`` on a cluster still Creating (or Updating for someone else) waits for it to settle first.
    An update of ours in flight is left to the engine, which follows it before acting. An intent never
    marked sent is waited on like someone else's update while the cluster is busy: once it settles the
    engine tells whether that intent went out (then follows it) or not (then sends this command), where
    it would otherwise answer "not sent" at once, --wait or not."""
    record = ctx.store.get(ref.key)
    if record is not None and record.pending is not None and record.pending.phase != "intent":
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
