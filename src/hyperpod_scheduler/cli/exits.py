"""How the scheduler commands (stop, start, tick, run, plan, status) end.

The codes and the mapping from a result's kind to its exit code are the app's (``app.outcomes``),
read by this face and by the proof suite alike: 0 the action happened (or nothing was needed), 1 it
was refused, blocked or failed, 2 bad input, 3 nothing was sent because the cluster is not ready
(``--wait`` waits for it instead), 130 interrupted (the line says whether an update had gone out).
"""

from __future__ import annotations

import typer

from hyperpod_scheduler.app.outcomes import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NOT_READY,
    EXIT_USAGE,
    FAILED_KINDS,
)
from hyperpod_scheduler.engine.runner import Result
from hyperpod_scheduler.errors import HyperpodSchedulerError


class NotReady(HyperpodSchedulerError):
    """Nothing was done: the cluster is Creating, Updating or otherwise busy."""

    exit_code = EXIT_NOT_READY


def exit_for(results: list[Result]) -> None:
    if any(r.kind in ("error", "failed", "refused") for r in results):
        raise typer.Exit(EXIT_FAILED)


__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_NOT_READY", "EXIT_USAGE", "FAILED_KINDS", "NotReady", "exit_for"]
