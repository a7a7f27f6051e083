"""What tick, run and plan need before they act on the config's clusters: a config file that governs
some, and an instant checked as it is parsed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hyperpod_scheduler.cli.context import Context, parse_instant
from hyperpod_scheduler.cli.output import error_line
from hyperpod_scheduler.config.load import config_path
from hyperpod_scheduler.engine.fleet import Governed
from hyperpod_scheduler.engine.ref import Result
from hyperpod_scheduler.errors import UsageError


def instant_check(option: str) -> Callable[[str | None], str | None]:
    """A callback that checks an instant argument as it is parsed (before any config is looked for)."""

    def check(value: str | None) -> str | None:
        if value:
            parse_instant(value, option)
        return value

    return check


def needs_config(config: str | None, command: str) -> None:
    """``tick``, ``run`` and ``plan`` act on the config's clusters: without one there is nothing to do."""
    if config_path(config) is None:
        raise UsageError(
            f"{command}: no config file: pass -c FILE, set HYPERPOD_SCHEDULER_CONFIG, or create "
            "./hyperpod-scheduler.yaml (examples/hyperpod-scheduler.yaml shows every key)"
        )


def governed_clusters(ctx: Context, config: str | None, command: str) -> list[Governed]:
    if not ctx.config.targets:
        raise UsageError(f"{command}: {config_path(config)} has no targets: it governs no cluster")
    governed = ctx.fleet().governed()
    for problem in ctx.fleet().problems:
        error_line(str(problem))
    return governed


def tick_and_say(ctx: Context, governed: list[Governed], **options: Any) -> list[Result]:
    """``ctx.tick(governed, **options)``, then the problems the tick itself found, on stderr: two targets'
    first looks (``Context.tick``) may show they name one cluster, a problem of this very tick that the
    resolution before it could not know (those it knew were said then)."""
    said = {str(p) for p in ctx.fleet().problems}
    results = ctx.tick(governed, **options)
    for problem in ctx.fleet().problems:
        if str(problem) not in said:
            error_line(str(problem))
    return results
