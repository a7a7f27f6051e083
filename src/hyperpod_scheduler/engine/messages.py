"""How the engine words what it did: durations, target changes, errors met on one cluster, who is reached."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.errors import HyperpodSchedulerError

if TYPE_CHECKING:
    from hyperpod_scheduler.engine.ref import ClusterRef


def reach_text(ref: ClusterRef) -> str:
    who = f"profile '{ref.profile}'" if ref.profile else "the default credentials"
    return f"cluster '{ref.name}' in {ref.region} through {who}"


def targets_text(view: ClusterView, targets: Mapping[str, int]) -> str:
    parts = []
    for g in view.groups:
        if g.name in targets:
            parts.append(f"{g.name} {g.target}->{targets[g.name]}")
    return ", ".join(parts)


def sizes_text(sizes: Mapping[str, int]) -> str:
    """``controller 1, workers 4``: sizes in a message a person reads, never a Python dict."""
    return ", ".join(f"{group} {count}" for group, count in sizes.items()) or "no groups"


def duration_text(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def error_text(exc: BaseException) -> str:
    """One line for any failure met on one cluster, including ones nobody foresaw."""
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        text = f"{err.get('Code', 'Error')}: {err.get('Message', '')}"
    elif isinstance(exc, BotoCoreError | HyperpodSchedulerError):
        text = str(exc)
    else:  # a parser or a guard tripping over this cluster's data: say what, keep going
        text = f"unexpected {type(exc).__name__}: {exc}"
    return " ".join(text.split())
