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
    """What a guard may look at about one stop. A guard's settings are the cluster's own, given to it
    when it is built for that cluster (``app.compose.guards_for`` from ``ref.settings``)."""

    cluster: str
    key: str
    region: str | None
    view: ClusterView
    groups_to_zero: tuple[str, ...]
    now: datetime
    dry_run: bool = False
    # The schedule instant this stop carries out, and what asked for it (schedule, manual, hold, retry).
    transition_at: datetime | None = None
    origin: str = "schedule"


@dataclass(frozen=True)
class Verdict:
    """``allow``: go ahead (an allow with ``detail`` is said as a note). ``block``: skip this stop (and
    notify). ``keep``: go ahead but leave the groups in ``floors`` at those counts."""

    guard: str
    decision: Decision
    reason: str
    floors: Mapping[str, int] = field(default_factory=dict)
    detail: Mapping[str, Any] = field(default_factory=dict)


class StartReport(Protocol):
    """What a guard with a Slurm side says after a start: did the restored nodes join, and why not."""

    @property
    def ready(self) -> bool | None: ...

    @property
    def reason(self) -> str: ...


class StopGuard(Protocol):
    """A named check before every stop, with its hooks declared (the engine never probes for them):

    - ``side_effects``: it acts on the cluster when it allows (signals, drains, requeues), so it is asked
      last, only if every other guard allowed, and only about the groups that really go to zero;
    - ``after_start``: True if it has a Slurm side to tell after a start (``started``); then ``started``
      resumes what its stop drained and reports readiness (None: its agent did not answer)."""

    name: str
    side_effects: bool
    after_start: bool

    def before_stop(self, ctx: StopContext) -> Verdict: ...

    def started(self, key: str, view: ClusterView, expected: Mapping[str, int]) -> StartReport | None: ...


class Guard:
    """The defaults of the contract: no side effects, nothing to say after a start."""

    name = "guard"
    side_effects = False
    after_start = False

    def started(self, key: str, view: ClusterView, expected: Mapping[str, int]) -> StartReport | None:
        return None
