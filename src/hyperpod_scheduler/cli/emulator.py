"""`hyperpod-scheduler emulator ...` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="emulator commands.", no_args_is_help=True)
