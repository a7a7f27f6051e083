"""``run``: the long-running loop, a tick every interval, following edits of the config file, until a
signal ends it."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import typer
from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.cli.config_watch import ConfigWatch
from hyperpod_scheduler.cli.context import make_context
from hyperpod_scheduler.cli.governing import needs_config, tick_and_say
from hyperpod_scheduler.cli.options import ConfigOpt, DryRunOpt, StateOpt
from hyperpod_scheduler.cli.output import console, error_line
from hyperpod_scheduler.config.load import config_path
from hyperpod_scheduler.config.model import DEFAULT_CONFIG_FILE
from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError
from hyperpod_scheduler.inputs import args


def register(app: typer.Typer) -> None:
    @app.command()
    def run(
        interval: float = typer.Option(
            60.0, "--interval", help="Seconds between ticks.", callback=lambda v: args.seconds(v, "--interval")
        ),
        ticks: int = typer.Option(0, "--ticks", min=0, help="Stop after N ticks (0: run until interrupted)."),
        dry_run: bool = DryRunOpt,
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
    ) -> None:
        """The long-running loop: tick every --interval seconds, following edits of the config file.

        A broken edit is reported and the last good config stays in force; SIGTERM or Ctrl-C ends the
        loop after the current pass."""
        needs_config(config, "run")
        ctx = make_context(config, state, False)
        watch = ConfigWatch(config_path(config) or Path(DEFAULT_CONFIG_FILE))
        engine, count = ctx.engine(), 0
        if not ctx.config.targets:  # refused before the loop, as tick refuses it
            raise UsageError(f"run: {config_path(config)} has no targets: it governs no cluster")
        with _stop_on_signals() as stopping:
            while not stopping.is_set():
                reloaded = watch.changed(ctx.config)
                if reloaded is not None:
                    ctx = ctx.reconfigured(reloaded)
                    engine = ctx.engine()
                try:
                    fleet = ctx.fleet()
                    governed = fleet.governed()
                    for problem in fleet.problems:
                        error_line(str(problem))
                    tick_and_say(ctx, governed, dry_run=dry_run, engine=engine)
                except Exception as exc:  # the loop outlives any one pass: the next tick tries again
                    error_line(f"tick failed: {_one_line(exc)}; the next tick tries again")
                count += 1
                if ticks and count >= ticks:
                    return
                stopping.wait(interval)
        console.print("run: stopped by a signal after the pass in progress", highlight=False)


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """SIGTERM and SIGINT end the loop after the pass in progress; a second one stops at once."""
    stopping = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stopping  # signals are only delivered to the main thread
        return

    def on_signal(signum: int, _frame: object) -> None:
        if stopping.is_set():
            raise KeyboardInterrupt
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stopping
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        return f"{err.get('Code', 'Error')}: {err.get('Message', '')}"
    text = str(exc) if isinstance(exc, HyperpodSchedulerError | BotoCoreError) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())
