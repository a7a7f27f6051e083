"""Options several command modules share, in a module that imports only Typer and the output helpers:
a command that can answer without the engine (``status`` with nothing configured) takes them from here
without importing the modules that drive it."""

from __future__ import annotations

import typer

from hyperpod_scheduler.cli.output import JSON_HELP

ConfigOpt = typer.Option(None, "--config", "-c", help="Config file (default: ./hyperpod-scheduler.yaml if present).")
StateOpt = typer.Option(
    None, "--state", help="State store: a SQLite path, sqlite:///path, dynamodb://TABLE?region=R, or memory:."
)
JsonOpt = typer.Option(False, "--json", help=JSON_HELP)
