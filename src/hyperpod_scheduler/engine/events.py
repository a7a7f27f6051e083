"""What the engine reports while it works. The CLI renders these; the fleet runner logs them as JSON."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

# waiting: an update refused while deep health checks run (sent again, not a failure); plan: a training
# plan's expiry warning or activation problem; approval: a release that waits for a person's approval.
Kind = Literal[
    "skip",
    "noop",
    "sent",
    "dry-run",
    "progress",
    "settled",
    "failed",
    "note",
    "error",
    "blocked",
    "refused",
    "drift",
    "waiting",
    "plan",
    "approval",
    "image",  # a group moved to another AMI release before a start (engine.images)
]


@dataclass(frozen=True)
class Event:
    at: datetime
    cluster: str
    kind: Kind
    message: str
    detail: dict[str, Any] = field(default_factory=dict)
    # For notification channels only (an approval link with its token): never in as_dict, logs or JSON.
    private: str = field(default="", repr=False)
    # Which of two clusters of this name it is ("account 111111111111"), where the config governs more
    # than one in the region (``ClusterRef.where``); "" when the name alone says.
    where: str = ""

    @property
    def label(self) -> str:
        """The cluster as a line read out of context names it: its name, and which one where need be."""
        return f"{self.cluster} ({self.where})" if self.where else self.cluster

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "cluster": self.cluster,
            **({"where": self.where} if self.where else {}),
            "kind": self.kind,
            "message": self.message,
            **({"detail": self.detail} if self.detail else {}),
        }


Sink = Callable[[Event], None]


def discard(_: Event) -> None:
    return None


class Collector:
    """A sink that keeps every event (tests, the demo's summary)."""

    def __init__(self, forward: Sink = discard) -> None:
        self.events: list[Event] = []
        self._forward = forward

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        self._forward(event)
