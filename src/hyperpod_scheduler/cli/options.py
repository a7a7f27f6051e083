"""Options several command modules share, in a module that imports only Typer and the output helpers:
a command that can answer without the engine (``status`` with nothing configured) takes them from here
without importing the modules that drive it."""

from __future__ import annotations

from collections.abc import Callable

import typer

from hyperpod_scheduler.cli.output import JSON_HELP


def _given(option: str, default: str) -> Callable[[str | None], str | None]:
    """A callback that refuses an empty value (a script's unset variable): it was the default, silently."""

    def check(value: str | None) -> str | None:
        from hyperpod_scheduler.errors import UsageError

        if value is not None and not value.strip():
            raise UsageError(f"{option}: empty; leave it out for {default}")
        return value

    return check


ConfigOpt = typer.Option(
    None,
    "--config",
    "-c",
    help="Config file (default: ./hyperpod-scheduler.yaml if present).",
    callback=_given("--config", "./hyperpod-scheduler.yaml"),
)
StateOpt = typer.Option(
    None,
    "--state",
    help="State store: a SQLite path, sqlite:///path, dynamodb://TABLE?region=R, or memory:.",
    callback=_given("--state", "the config's store, else the default one"),
)
JsonOpt = typer.Option(False, "--json", help=JSON_HELP)
DryRunOpt = typer.Option(False, "--dry-run", help="Show what would be sent; change nothing.")


def region_checked(value: str | None) -> str | None:
    """``--region`` checked as parsed (one parameter: Typer hands a callback's others its context)."""
    from hyperpod_scheduler.inputs import args  # checked as parsed: it keys the cluster's record

    return args.region(value)


RegionOpt = typer.Option(
    None, "--region", help="AWS region (default: from the config, else the AWS chain).", callback=region_checked
)


# ``--profile`` as parsed: an empty one (a script's unset variable) is refused, not the AWS error of a
# profile named ''.
profile_checked = _given("--profile", "the default credentials")


ProfileOpt = typer.Option(None, "--profile", help="AWS profile.", callback=profile_checked)


def _cluster_name(value: str) -> str:
    from hyperpod_scheduler.inputs import args  # checked as parsed; imported only by a command that takes one

    return args.cluster_name(value, "CLUSTER")


ClusterArg = typer.Argument(
    ...,
    metavar="CLUSTER",
    help="Cluster name.",
    show_default=False,
    callback=_cluster_name,  # before it is looked up, stored or used
)
