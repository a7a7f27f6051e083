"""What the CLI hands the composition root: the config file, the store, the AWS chain, the clock
(``--at``), the event printer and the user's name. The engine itself is built in ``app.compose``."""

from __future__ import annotations

import getpass
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime

from rich.text import Text

from hyperpod_scheduler.app.compose import Context, Source, chain_clients
from hyperpod_scheduler.app.instants import parse_instant
from hyperpod_scheduler.cli.fleet_source import is_fleet_location
from hyperpod_scheduler.cli.output import console, err_console, safe
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.config.paths import CONFIG_ENV
from hyperpod_scheduler.engine.events import Event, Sink
from hyperpod_scheduler.store import open_store

__all__ = ["Context", "make_context", "parse_instant", "printer"]

STYLE = {
    "sent": "bold cyan",
    "settled": "green",
    "failed": "bold red",
    "error": "red",
    "skip": "yellow",
    "noop": "dim",
    "dry-run": "magenta",
    "progress": "blue",
    "note": "white",
    "waiting": "yellow",
    "plan": "bold yellow",
    "approval": "bold yellow",
    "image": "bold cyan",
}


def printer(as_json: bool) -> Sink:
    def emit(event: Event) -> None:
        if as_json:
            return
        style = STYLE.get(event.kind, "white")
        # Escaped before it is assembled: a job name or an AWS message is outside text (a Slurm user can
        # put an OSC title or a clear screen in one), and a Text bypasses the console's render_str.
        line = Text.assemble(
            (f"{event.at:%a %Y-%m-%d %H:%M} {_zone(event.at)} ", "dim"),
            (safe(event.label), "bold"),
            " ",
            (event.kind, style),
            " ",
        )
        line.append(safe(event.message))  # plain text: a message is never markup
        console.print(line, highlight=False, soft_wrap=True)

    return emit


def _zone(at: datetime) -> str:
    """The zone an instant is written in: its own (``tick --at 09:30+01:00`` stays 09:30 UTC+01:00),
    never a "Z" after a local time."""
    name = at.tzname()
    return "UTC" if name in (None, "UTC", "UTC+00:00") else str(name)


def make_context(
    config_path: str | None,
    state: str | None,
    as_json: bool,
    at: str | None = None,
    *,
    events: Sink | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Context:
    source = source_for(config_path, state)
    fixed = parse_instant(at, "--at") if at else None
    now: Callable[[], datetime] = (lambda: fixed) if fixed else (lambda: datetime.now(UTC))
    return Context(
        source.config,
        source.store,
        source.clients,
        now,
        events or printer(as_json),
        actor=_whoami(),
        sleep=sleep,
        warn=lambda m: err_console.print(f"warning: {m}", markup=False),
        paused=source.paused,
        accounts=source.accounts,
    )


def source_for(config_path: str | None, state: str | None) -> Source:
    """The config file with its store and the AWS chain, or (``dynamodb://TABLE``, also through
    $HYPERPOD_SCHEDULER_CONFIG) the hub's pushed fleet config, its table and each target's role."""
    location = config_path or os.environ.get(CONFIG_ENV)
    if is_fleet_location(location):
        from hyperpod_scheduler.cli.fleet_source import fleet_source

        return fleet_source(str(location), state)
    config = load_config(config_path)
    return Source(config, open_store(state or config.state), chain_clients())


def _whoami() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return "unknown"
