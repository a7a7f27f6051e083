"""Following a stop or start with ``--wait``: polling that adapts to how fast the control plane moves,
and what the person watching sees (a live Rich display at a terminal, one line per change elsewhere).

The display knows nothing of AWS: it renders the engine's events (``sent`` carries the targets,
``progress`` the current counts, group statuses and any per-group phase the engine reports).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from hyperpod_scheduler.app.wording import duration, when
from hyperpod_scheduler.cli.output import console, safe
from hyperpod_scheduler.engine.events import Event, Sink
from hyperpod_scheduler.engine.ref import ClusterRef
from hyperpod_scheduler.store.outcomes import read_phases
from hyperpod_scheduler.store.records import GroupPhases, RetryState


@dataclass
class AdaptivePoll:
    """A ``sleep`` for the engine's follow loop: starts at ``first_s`` and grows by ``factor`` up to the
    configured poll interval while nothing changes; any change starts it small again. Against an
    emulator at 600x a wait ends in seconds; against AWS it settles at ``poll_seconds`` within a minute."""

    first_s: float = 1.0
    factor: float = 1.6
    sleep: Callable[[float], None] = time.sleep
    _next: float = 0.0

    def reset(self) -> None:
        self._next = self.first_s

    def __call__(self, requested: float) -> None:
        step = min(self._next or self.first_s, requested)
        self._next = min(max(step, self.first_s) * self.factor, requested)
        self.sleep(step)


@dataclass
class GroupLine:
    current: int | None = None
    target: int | None = None
    status: str = ""
    phase: str = ""


@dataclass
class WaitView:
    """What a wait looks like so far: built from the engine's events for one cluster."""

    cluster: str
    action: str
    clock: Callable[[], float] = time.monotonic
    started: float = field(default_factory=time.monotonic)
    status: str = "looking at the cluster"
    sent: bool = False
    done: bool = False
    groups: dict[str, GroupLine] = field(default_factory=dict)

    def _group(self, name: str) -> GroupLine:
        return self.groups.setdefault(name, GroupLine())

    def take(self, event: Event) -> bool:
        """Fold one event in; True when it changed what is shown."""
        if event.cluster != self.cluster:
            return False
        d: dict[str, Any] = event.detail
        if event.kind == "sent":
            self.sent = True
            for name, target in (d.get("targets") or {}).items():
                self._group(name).target = int(target)
        for name, count in (d.get("counts") or {}).items():
            self._group(name).current = int(count)
        for name, target in (d.get("target_counts") or {}).items():
            self._group(name).target = int(target)
        for name, status in (d.get("statuses") or {}).items():
            self._group(name).status = str(status)
        phases = d.get("phases") or {}
        if isinstance(phases, dict):
            typed = read_phases(d)
            for name, phase in phases.items():
                # The engine sends each group's phases as a record; a person reads them in words.
                gp = typed.get(str(name))
                self._group(str(name)).phase = phase_words(gp) if gp is not None else _words(phase)
        for name, outcome in (d.get("outcomes") or {}).items():
            if isinstance(outcome, dict):
                line = self._group(name)
                line.current, line.target = outcome.get("current"), outcome.get("target")
                line.phase = _words(outcome.get("outcome", line.phase))
        if event.kind in ("settled", "failed", "error", "refused", "blocked"):
            self.done = True
        self.status = said(event)
        return True

    def elapsed(self) -> str:
        return duration(self.clock() - self.started) or "0 s"

    def render(self) -> RenderableType:
        head = Text.assemble(
            (safe(f"{self.action} {self.cluster}"), "bold"), f"  {self.elapsed()} elapsed  ", (safe(self.status), "dim")
        )
        if not self.groups:
            return head
        # Group, counts and status never wrap (short, and a cut name misleads); the phase wraps at words
        # so a narrow terminal keeps every row whole.
        table = Table(box=None, pad_edge=False, show_edge=False)
        table.add_column("group", no_wrap=True, overflow="fold")
        table.add_column("nodes now / target", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("phase", overflow="fold", min_width=20)
        for name, g in self.groups.items():
            counts = f"{'?' if g.current is None else g.current} / {'?' if g.target is None else g.target}"
            table.add_row(*(Text(safe(cell)) for cell in (name, counts, g.status or "-", g.phase or "-")))
        return Group(head, table)


def said(event: Event) -> str:
    """An event's line without a doubled prefix: progress is its message alone ("start: 08:05: ..."),
    and a message that already opens with the event's kind ("stop blocked: ...") is not prefixed again."""
    if event.kind == "progress" or event.kind in event.message.replace(":", " ").split()[:2]:
        return event.message
    return f"{event.kind}: {event.message}"


def phase_words(gp: GroupPhases) -> str:
    """One group's start in words: "3 of 6 up, 2 in lifecycle setup, 1 not launched yet". A node without
    an instance yet is "not launched yet", never a capacity wait: only AWS's insufficient-capacity answer
    says that, and it arrives as its own event."""
    if gp.target == 0:
        return "nothing to start"
    if gp.ready_at() is not None:
        return f"ready: {gp.running} of {gp.target} up"
    if gp.seen_at is None:
        return f"requested {gp.target}, not looked at yet"
    parts = [f"{gp.running} of {gp.target} up"]
    if gp.in_checks:
        parts.append(f"{gp.in_checks} in deep health checks")
    if gp.in_setup:
        parts.append(f"{gp.in_setup} in lifecycle setup")
    if gp.waiting:
        parts.append(f"{gp.waiting} not launched yet")
    return ", ".join(parts)


def _words(value: object) -> str:
    """Any other value in words: a mapping as "key value" pairs, never a Python repr."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_words(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_words(v) for v in value)
    return str(value)


def retry_line(ref: ClusterRef, retry: RetryState) -> str:
    """What runs a retry the engine announced: not this command (it has ended), the next ``tick`` or a
    ``run`` loop at or after the retry's time."""
    return (
        f"{ref.name}: retry {retry.attempt} is due at {when(retry.next_at)} (until {when(retry.deadline)}); this "
        "command has ended, so the next `hyperpod-scheduler tick` (cron) or `run` loop at or after that time "
        f"sends it; {ref.command('start', '--wait')} tries again now"
    )


class LiveWait:
    """The live display at a terminal (refreshed four times a second, so elapsed time moves while the
    poll sleeps); elsewhere each event is one printed line, as without ``--wait``."""

    def __init__(self, view: WaitView, poll: AdaptivePoll, forward: Sink, live: bool) -> None:
        self.view = view
        self.poll = poll
        self.forward = forward
        self._live = Live(console=console, refresh_per_second=4, transient=False) if live else None

    def __enter__(self) -> LiveWait:
        if self._live is not None:
            self._live.update(_Dynamic(self.view))
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    def __call__(self, event: Event) -> None:
        changed = self.view.take(event)
        if changed and event.kind == "progress":
            self.poll.reset()  # something moves: look again soon
        if self._live is None:
            self.forward(event)
        elif event.kind in ("note", "error", "failed", "blocked", "refused", "skip", "noop", "drift"):
            self._live.console.print(Text(safe(said(event))))


class _Dynamic:
    """Rendered anew at every refresh, so the elapsed time is always current."""

    def __init__(self, view: WaitView) -> None:
        self.view = view

    def __rich__(self) -> RenderableType:
        return self.view.render()


__all__ = ["AdaptivePoll", "LiveWait", "WaitView", "phase_words", "retry_line"]
