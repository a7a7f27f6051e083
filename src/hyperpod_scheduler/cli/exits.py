"""How the scheduler commands (stop, start, tick, run, plan, status) end.

Exit codes (docs/scheduler.md, "Exit codes"): 0 the action happened (or nothing was needed), 1 it was
refused, blocked or failed, 2 bad input (an unknown cluster, no config where one is needed), 3 nothing
was done because the cluster is not ready (Creating, Updating, ...; ``--wait`` waits for it instead),
130 interrupted (the line says whether an update had gone out).
"""

from __future__ import annotations

import typer

from hyperpod_scheduler.engine.runner import Result
from hyperpod_scheduler.errors import HyperpodSchedulerError

EXIT_FAILED, EXIT_USAGE, EXIT_NOT_READY, EXIT_INTERRUPTED = 1, 2, 3, 130
FAILED_KINDS = ("error", "failed", "refused", "blocked")


class NotReady(HyperpodSchedulerError):
    """Nothing was done: the cluster is Creating, Updating or otherwise busy."""

    exit_code = EXIT_NOT_READY


def exit_for(results: list[Result]) -> None:
    if any(r.kind in ("error", "failed", "refused") for r in results):
        raise typer.Exit(EXIT_FAILED)
