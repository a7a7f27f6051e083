"""Shared CLI output helpers: Rich for people, ``--json`` for programs, one-line errors on stderr."""

from __future__ import annotations

import json
import sys
from datetime import date, datetime
from typing import Any

from rich.console import Console

# Logs and CI output are not terminals: Rich would wrap them at 80 columns.
console = Console(width=None if sys.stdout.isatty() else 150)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def _default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def print_json(data: Any) -> None:
    """Plain JSON on stdout (no Rich markup, so it pipes cleanly into jq)."""
    print(json.dumps(data, indent=2, default=_default, sort_keys=False))


def error_line(message: str) -> None:
    err_console.print(f"error: {message}", markup=False)
