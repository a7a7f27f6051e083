"""The guard interface. Each risk check is a named unit with one question: may this stop go ahead,
and what should it keep? The engine lists every verdict in `plan` and in the history."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from hyperpod_scheduler.cluster.view import ClusterView

Decision = Literal["allow", "block", "keep"]


@dataclass(frozen=True)
class StopContext:
    """What a guard may look at. ``settings`` is the cluster's resolved config (guards read their own keys)."""

    cluster: str
    key: str
    region: str | None
    view: ClusterView
    groups_to_zero: tuple[str, ...]
    now: datetime
    settings: Mapping[str, Any] = field(default_factory=dict)
    dry_run: bool = False
    # The schedule instant this stop carries out, and what asked for it (schedule, manual, hold, retry).
    transition_at: datetime | None = None
    origin: str = "schedule"


@dataclass(frozen=True)
class Verdict:
    """``allow``: go ahead. ``block``: skip this stop (and notify). ``keep``: go ahead but leave
    ``keep_groups`` at their current size (or at ``floors``)."""

    guard: str
    decision: Decision
    reason: str
    keep_groups: tuple[str, ...] = ()
    floors: Mapping[str, int] = field(default_factory=dict)
    detail: Mapping[str, Any] = field(default_factory=dict)


class StopGuard(Protocol):
    name: str

    def before_stop(self, ctx: StopContext) -> Verdict: ...
