"""`hyperpod-scheduler cluster ...` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="cluster commands.", no_args_is_help=True)
