"""What a person's stop or start ends with: the exit code a result's kind maps to, one mapping for
every face and for the proof suite (``tests/reliability/test_state_machine.py`` judges "a command is
never dropped" by this very function, not by a copy of it).

Exit codes (docs/scheduler.md, "Exit codes"): 0 the action happened (or nothing was needed), 1 it was
refused, blocked or failed, 2 bad input (an unknown cluster, no config where one is needed), 3 nothing
was sent because the cluster is not ready (Creating, Updating, an update of the same kind already
under way, deep health checks running; ``--wait`` waits for it instead), 130 interrupted.
"""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_READY, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# Kinds (``engine.ref.Result.kind``) that end a stop or start as refused, blocked or failed.
FAILED_KINDS = ("error", "failed", "refused", "blocked")
# Kinds that say nothing was sent yet and the cluster is the reason: a skip (busy, another runner, an
# update already under way) or a refusal while deep health checks run. Not kept for a later tick.
NOT_SENT_KINDS = ("skip", "waiting")


def manual_exit(kind: str) -> int:
    """The exit code of a manual ``stop`` or ``start`` whose result is of ``kind``."""
    if kind in FAILED_KINDS:
        return EXIT_FAILED
    if kind in NOT_SENT_KINDS:
        return EXIT_NOT_READY
    return EXIT_OK


__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_READY",
    "EXIT_OK",
    "EXIT_USAGE",
    "FAILED_KINDS",
    "NOT_SENT_KINDS",
    "manual_exit",
]
