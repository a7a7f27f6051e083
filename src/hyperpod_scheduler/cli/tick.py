"""``tick``: one reconcile pass over every governed cluster (for cron)."""

from __future__ import annotations

import typer

from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.cli.context import make_context
from hyperpod_scheduler.cli.exits import exit_for
from hyperpod_scheduler.cli.governing import governed_clusters, instant_check, needs_config, tick_and_say
from hyperpod_scheduler.cli.options import ConfigOpt, DryRunOpt, JsonOpt, StateOpt
from hyperpod_scheduler.cli.output import Listing, console, emit, nothing_due, output_format, output_option
from hyperpod_scheduler.engine.held import holds_in_force
from hyperpod_scheduler.engine.identity import reach_of
from hyperpod_scheduler.engine.ref import ClusterRef, Result


def register(app: typer.Typer) -> None:
    @app.command("tick")
    def tick_cmd(
        at: str | None = typer.Option(
            None, "--at", help="Evaluate schedules at this ISO instant instead of now.", callback=instant_check("--at")
        ),
        dry_run: bool = DryRunOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
        output: str | None = output_option(),
    ) -> None:
        """One reconcile pass over every governed cluster (for cron). Exit 1 if any cluster failed."""
        fmt = output_format(output, as_json)
        needs_config(config, "tick")
        ctx = make_context(config, state, fmt != "table" and fmt != "wide", at)
        governed = governed_clusters(ctx, config, "tick")
        results = tick_and_say(ctx, governed, dry_run=dry_run)
        if fmt in ("json", "yaml"):
            emit(Listing([]), fmt, [_document(ctx, g.ref, r) for g, r in zip(governed, results, strict=True)])
        elif not results:
            console.print("tick: no governed cluster was found (tag-selected targets found none)")
        elif all(r.kind in ("noop", "quiet") for r in results):
            holds = holds_in_force(ctx.store.get, governed, ctx.now())
            console.print(nothing_due(ctx.now(), governed, holds), markup=False)  # cron's log shows the pass ran
        exit_for(results)
        if ctx.fleet().problems:
            raise typer.Exit(1)  # a target or cluster was left out: cron should see it


def _document(ctx: Context, ref: ClusterRef, result: Result) -> dict[str, object]:
    """A cluster's result as JSON, with where the cluster is: two targets' clusters of one name are two
    results a reader must tell apart (the account as this tick learned it, where it did)."""
    account = ref.account or ctx.store.account_for(reach_of(ref))
    return {**result.__dict__, "account": account, "profile": ref.profile, "region": ref.region}
