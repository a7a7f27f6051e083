"""Shared CLI output helpers: Rich for people, ``--json`` for programs, one-line errors on stderr.

Both consoles escape control characters in every string they render (``inputs.text.clean``) and mask the
credentials of any URL in it (``inputs.redact.scrub``): names, messages and reasons come from files,
arguments, AWS and Slurm, and none of them may drive the terminal or show a password.
"""

from __future__ import annotations

import json
import sys
from datetime import date, datetime
from typing import Any

from rich.console import Console
from rich.errors import MarkupError
from rich.text import Text

from hyperpod_scheduler.inputs.redact import scrub
from hyperpod_scheduler.inputs.text import clean


class SafeConsole(Console):
    """A Rich console that escapes control characters in every string before it is styled, and shows a
    string whose brackets are not valid markup (an AWS message with ``[/x]`` in it) as plain text
    instead of failing the command."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        safe = scrub(clean(text))  # and never a URL's password, whoever put it in the text
        try:
            return super().render_str(safe, **kwargs)
        except MarkupError:
            return super().render_str(safe, **{**kwargs, "markup": False})


# Logs and CI output are not terminals: Rich would wrap them at 80 columns.
console = SafeConsole(width=None if sys.stdout.isatty() else 150)
err_console = SafeConsole(stderr=True, highlight=False, soft_wrap=True)


def _default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def print_json(data: Any) -> None:
    """Plain JSON on stdout (no Rich markup, so it pipes cleanly into jq; control characters are escaped
    by JSON itself)."""
    print(json.dumps(data, indent=2, default=_default, sort_keys=False))


def error_line(message: str) -> None:
    """``error: ...`` on stderr, always one line: newlines and control characters are escaped."""
    err_console.print(f"error: {scrub(clean(message, one_line=True))}", markup=False)
