"""`hyperpod-scheduler schedule ...` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="schedule commands.", no_args_is_help=True)
