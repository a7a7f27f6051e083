"""Shared CLI output: Rich for people at a terminal, plain aligned columns for pipes and logs,
``-o json|yaml`` (and ``--json``) for programs, one-line errors on stderr.

Every listing command builds one ``Listing`` (columns and rows of text) and one document (plain data)
and hands both to ``emit``, which picks the form: ``table`` fits the width, ``wide`` adds columns and
never cuts a cell, ``json``/``yaml`` print the document. Whether stdout is a terminal is asked at the
moment of printing, so the same code serves a pty, a pipe and a test runner.

Every string shown to a person (console text, table cells, titles, notes, error lines) has its control
characters escaped (``inputs.text.clean``) and the credentials of any URL in it masked
(``inputs.redact.scrub``): names, messages and reasons come from files, arguments, AWS and Slurm, and
none of them may drive the terminal or show a password.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Literal

import typer

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs.redact import scrub
from hyperpod_scheduler.inputs.text import clean, digits

if TYPE_CHECKING:
    from hyperpod_scheduler.cli.terminal import SafeConsole, console, err_console, rich_table
    from hyperpod_scheduler.engine.fleet import Governed
    from hyperpod_scheduler.store.records import Hold

Format = Literal["table", "wide", "json", "yaml"]
FORMATS: tuple[Format, ...] = ("table", "wide", "json", "yaml")
ELLIPSIS = "\u2026"


def safe(text: str) -> str:
    """``text`` fit for a terminal: control characters escaped, no URL's password."""
    return scrub(clean(text))


# Rich costs some 40 ms to import, which a cron `schedule check` or `--help` should not pay: the console
# and Rich tables live in cli/terminal.py, imported the first time one of them is used.
_TERMINAL = frozenset({"SafeConsole", "console", "err_console", "rich_table"})


def __getattr__(name: str) -> Any:
    if name in _TERMINAL:
        return getattr(importlib.import_module("hyperpod_scheduler.cli.terminal"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def output_option(default: Format = "table") -> Any:
    return typer.Option(
        None,
        "--output",
        "-o",
        metavar="FORMAT",
        help=f"table (fits the width), wide (more columns, nothing cut), json or yaml (default: {default}).",
    )


JSON_HELP = "Same as -o json."


def output_format(output: str | None, as_json: bool = False) -> Format:
    """The format asked for by ``-o`` (``--json`` is ``-o json``); one line naming the value if unknown."""
    if output is None:
        return "json" if as_json else "table"
    value = output.strip().lower()
    if value not in FORMATS:
        raise UsageError(f"-o/--output: {output!r} is not one of {', '.join(FORMATS)}")
    if as_json and value != "json":
        raise UsageError(f"--json and -o {value}: choose one output")
    return value


def is_terminal() -> bool:
    return sys.stdout.isatty()


def width() -> int | None:
    """The width to fit: the terminal's, else ``$COLUMNS`` when set, else none (a pipe takes whole lines)."""
    if is_terminal():
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if digits(columns) and int(columns) > 0 else None


@dataclass(frozen=True)
class Column:
    header: str
    wide_only: bool = False  # shown with -o wide only
    right: bool = False  # numbers
    keep: bool = False  # never cut (names people copy into the next command)


@dataclass
class Listing:
    columns: Sequence[Column]
    rows: list[list[str]] = field(default_factory=list)
    title: str | None = None
    empty: str = ""  # said instead of an empty table
    notes: list[str] = field(default_factory=list)  # lines printed after the table


def _default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def plain_data(data: Any) -> Any:
    """``data`` as JSON types only (datetimes as ISO text), for JSON and YAML alike. A NaN or an infinity
    raises ValueError: JSON has no such number, and a program reading ours must never meet one."""
    return json.loads(json.dumps(data, default=_default, allow_nan=False))


def scrubbed(data: Any) -> Any:
    """Plain ``data`` with every string passed through ``scrub``: a message in a document (an AWS error
    naming its endpoint, with a query token) shows no more than the same message on a terminal."""
    if isinstance(data, str):
        return scrub(data)
    if isinstance(data, dict):
        return {scrubbed(k): scrubbed(v) for k, v in data.items()}
    if isinstance(data, list):
        return [scrubbed(v) for v in data]
    return data


def print_json(data: Any) -> None:
    """Plain JSON on stdout (no Rich markup, so it pipes cleanly into jq; control characters are escaped
    by JSON itself)."""
    print(json.dumps(scrubbed(plain_data(data)), indent=2, sort_keys=False, allow_nan=False))


def print_yaml(data: Any) -> None:
    import yaml  # only a command asked for -o yaml pays for PyYAML

    print(yaml.safe_dump(scrubbed(plain_data(data)), sort_keys=False, allow_unicode=True, width=1_000_000), end="")


def emit(listing: Listing, fmt: Format, document: Any) -> None:
    """Print ``listing`` as a table, or ``document`` as JSON/YAML."""
    if fmt == "json":
        print_json(document)
        return
    if fmt == "yaml":
        print_yaml(document)
        return
    columns = [i for i, c in enumerate(listing.columns) if fmt == "wide" or not c.wide_only]
    if not listing.rows and listing.empty:
        if listing.title:
            print(safe(listing.title))
        print(safe(listing.empty))
    elif is_terminal():
        from hyperpod_scheduler.cli import terminal

        # The terminal's own width, -o wide too: a line wider than the terminal is folded by the terminal
        # itself, header included; the table folds its cells at words instead.
        terminal.SafeConsole(highlight=False).print(terminal.rich_table(listing, fmt))
    else:
        for line in plain_table(listing, columns, None if fmt == "wide" else width()):
            print(line)
    for note in listing.notes:
        print(safe(note))


def plain_table(listing: Listing, columns: list[int], fit: int | None) -> list[str]:
    """Aligned columns separated by two spaces, no boxes; with ``fit`` the widest cuttable cells are
    shortened (``…``) until each line fits."""
    heads = [listing.columns[i].header.upper() for i in columns]
    cells = [[" ".join(safe(row[i]).split()) for i in columns] for row in listing.rows]
    widths = [max([len(h), *(len(r[k]) for r in cells)]) for k, h in enumerate(heads)]
    if fit is not None:
        gap = 2 * (len(widths) - 1)
        cuttable = [k for k, i in enumerate(columns) if not listing.columns[i].keep]
        while sum(widths) + gap > fit and cuttable:
            k = max(cuttable, key=lambda j: widths[j])
            floor = max(len(heads[k]), 8)
            if widths[k] <= floor:
                cuttable.remove(k)
                continue
            widths[k] = max(floor, widths[k] - (sum(widths) + gap - fit))
    out = [] if listing.title is None else [safe(listing.title)]

    def line(values: list[str]) -> str:
        parts = []
        for k, value in enumerate(values):
            text = value if len(value) <= widths[k] else value[: widths[k] - 1] + ELLIPSIS
            right = listing.columns[columns[k]].right
            parts.append(text.rjust(widths[k]) if right else text.ljust(widths[k]))
        return "  ".join(parts).rstrip()

    out.append(line(heads))
    out.extend(line(r) for r in cells)
    return out


def error_line(message: str) -> None:
    """``error: ...`` on stderr, always one line: newlines and control characters are escaped."""
    from hyperpod_scheduler.cli.terminal import err_console

    err_console.print(f"error: {scrub(clean(message, one_line=True))}", markup=False)


def warning_line(message: str) -> None:
    from hyperpod_scheduler.cli.terminal import err_console

    err_console.print(f"warning: {scrub(clean(message, one_line=True))}", markup=False)


def nothing_due(now: datetime, governed: list[Governed], holds: Mapping[str, Hold]) -> str:
    """``tick: nothing due at Thu 09:30 UTC; next: g5-dev stop Thu 19:00 CET``: a pass that sent nothing
    says so, and when the engine next changes something (in the schedule's own zone), as the ``holds``
    in force leave it (``engine.held.next_change``): a cluster held until released is promised nothing."""
    from hyperpod_scheduler.app.wording import clock, when  # only tick needs it: cron's other commands stay light
    from hyperpod_scheduler.engine.held import next_change

    upcoming = []
    for g in governed:
        found = next_change(g, holds.get(g.ref.key), now)
        if found:
            upcoming.append((found[0], g.ref.name, found[1], g.schedule.timezone))
    head = f"tick: nothing due at {clock(now, now.tzinfo)}"
    if not upcoming:
        return f"{head}; no cluster's schedule (or hold) changes it again"
    at, name, state, zone = min(upcoming, key=lambda u: (u[0], u[1]))
    verb = "start" if state == "running" else "stop"
    return f"{head}; next: {name} {verb} {when(at, zone)}"


__all__ = [
    "FORMATS",
    "Column",
    "Format",
    "Listing",
    "SafeConsole",
    "console",
    "emit",
    "err_console",
    "error_line",
    "is_terminal",
    "nothing_due",
    "output_format",
    "output_option",
    "plain_data",
    "plain_table",
    "print_json",
    "print_yaml",
    "rich_table",
    "safe",
    "warning_line",
    "width",
]
