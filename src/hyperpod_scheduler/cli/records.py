"""Commands on a cluster's record: history (what happened), hold and release (a person overrides the
schedule), claim (whose cluster this is) and forget (drop the recorded sizes). Each takes ``--region``
and ``--profile``: two accounts may each have a cluster of one name.

Exit codes as in ``cli.exits``: 0 done, 2 bad input (an unknown cluster, a name that needs a profile).
"""

from __future__ import annotations

import typer

from hyperpod_scheduler.app.history import sentence
from hyperpod_scheduler.app.wording import duration, iso_minute
from hyperpod_scheduler.cli.context import make_context
from hyperpod_scheduler.cli.options import ClusterArg, ConfigOpt, DryRunOpt, JsonOpt, ProfileOpt, RegionOpt, StateOpt
from hyperpod_scheduler.cli.output import Column, Listing, console, emit, output_format, output_option
from hyperpod_scheduler.cli.refs import cluster_ref, governed_ref, known_ref
from hyperpod_scheduler.engine.messages import sizes_text
from hyperpod_scheduler.errors import UsageError


def register(app: typer.Typer) -> None:
    @app.command()
    def history(
        cluster: str = ClusterArg,
        region: str | None = RegionOpt,
        profile: str | None = ProfileOpt,
        limit: int = typer.Option(20, "--limit", min=1),
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
        output: str | None = output_option(),
    ) -> None:
        """The actions taken on a cluster, newest first: what happened, per group, and how long it took."""
        fmt = output_format(output, as_json)
        ctx = make_context(config, state, fmt in ("json", "yaml"))
        ref, governed = governed_ref(ctx, cluster, region, profile)
        entries = ctx.store.history(ref.key, limit=limit)
        if not entries and ctx.store.get(ref.key) is None and not governed:
            raise UsageError(f"history: no record of cluster {cluster!r} in {ref.region} (key {ref.key})")
        rows = []
        for e in entries:
            said = sentence(e)
            rows.append([iso_minute(e.at), e.action, e.actor, e.outcome, said.text, duration(e.duration_s)])
        listing = Listing(
            [
                Column("at (UTC)", keep=True),
                Column("action", keep=True),
                Column("by"),
                Column("outcome", wide_only=True),
                Column("what happened"),
                Column("took", wide_only=True, right=True),
            ],
            rows,
            title=f"history of {cluster}",
            empty="no actions recorded yet",
        )
        emit(listing, fmt, [{**e.model_dump(mode="json"), "sentence": sentence(e).text} for e in entries])

    @app.command()
    def hold(
        cluster: str = ClusterArg,
        until: str | None = typer.Option(None, "--until", help="ISO instant the hold ends (default: until released)."),
        hold_state: str = typer.Option("running", "--state-wanted", help="Keep the cluster 'running' or 'stopped'."),
        reason: str = typer.Option("", "--reason", help="Why (recorded in the history)."),
        region: str | None = RegionOpt,
        profile: str | None = ProfileOpt,
        dry_run: bool = DryRunOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
    ) -> None:
        """Override the schedule: keep a cluster running (or stopped) until a time or until released."""
        from hyperpod_scheduler.app.actions import check_hold, check_reason

        if hold_state not in ("running", "stopped"):  # before the config is read: the answer is the same
            raise UsageError(f"--state-wanted: {hold_state!r} is not one of running, stopped")
        reason = check_reason(reason, "--reason")
        ctx = make_context(config, state, False)
        kept, end = check_hold(hold_state, until, ctx.now(), state_field="--state-wanted", until_field="--until")
        ref = known_ref(ctx, cluster, region, profile, "hold")
        ends = f" until {iso_minute(end)}" if end else " until released"
        if dry_run:
            console.print(f"{cluster}: would hold {kept}{ends}")
            return
        ctx.engine().set_hold(ref, kept, end, reason)
        console.print(f"{cluster}: held {kept}{ends}")

    @app.command()
    def release(
        cluster: str = ClusterArg,
        region: str | None = RegionOpt,
        profile: str | None = ProfileOpt,
        dry_run: bool = DryRunOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
    ) -> None:
        """End a hold; the next tick applies what the schedule wants."""
        ctx = make_context(config, state, False)
        ref = known_ref(ctx, cluster, region, profile, "release")
        if dry_run:
            record = ctx.store.get(ref.key)
            console.print(f"{cluster}: " + ("would release the hold" if record and record.hold else "no hold"))
            return
        released = ctx.engine().release(ref)
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
        ref = cluster_ref(ctx, cluster, region, profile)
        console.print(ctx.engine().claim(ref), highlight=False)

    @app.command("allow-image")
    def allow_image(
        cluster: str = ClusterArg,
        group: str = typer.Argument(..., help="Instance group name."),
        release: str | None = typer.Option(None, "--release", help="Only this release (default: every one)."),
        region: str | None = RegionOpt,
        profile: str | None = ProfileOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
    ) -> None:
        """Let a group take again an AMI release refused after its first morning failed on it."""
        ctx = make_context(config, state, False)
        ref = cluster_ref(ctx, cluster, region, profile)
        allowed = ctx.engine().allow_image(ref, group, release)
        said = f"may take {', '.join(allowed)} again" if allowed else "no refused release to allow"
        console.print(f"{cluster}: {group} {said}", markup=False)

    @app.command()
    def forget(
        cluster: str = ClusterArg,
        region: str | None = RegionOpt,
        profile: str | None = ProfileOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
    ) -> None:
        """Drop the sizes recorded at the last stop (a start then restores nothing); for a cluster or a group
        replaced while stopped, whose recorded sizes a start refuses to restore onto something else."""
        ctx = make_context(config, state, False)
        ref = cluster_ref(ctx, cluster, region, profile)
        sizes = ctx.engine().forget(ref)
        if sizes is None:
            console.print(f"{cluster}: no recorded sizes to forget", markup=False)
        else:
            console.print(f"{cluster}: forgot the recorded sizes {sizes_text(sizes)}", markup=False)
