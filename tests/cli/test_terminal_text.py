"""Outside text on the operator's terminal: a Slurm job name or an AWS message reaches `stop`, `tick` and
`run` event lines, `--wait`'s live view and tables. However the line is built (a Rich ``Text`` assembled
from an event bypassed the console's string check), escape sequences show escaped and no link is made."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime

import pytest
from rich.table import Table
from rich.text import Text

from hyperpod_scheduler.cli import context, waiting
from hyperpod_scheduler.cli.terminal import SafeConsole
from hyperpod_scheduler.engine.events import Event

AT = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
OSC_TITLE = "\x1b]0;pwned\x07"
OSC_LINK = "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"
CLEAR = "\x1b[2J\x1b[H"
HOSTILE = f"job {OSC_TITLE}train{OSC_LINK} {CLEAR}keeps checkpoints\r\u202eevil"


def _terminal() -> tuple[SafeConsole, io.StringIO]:
    out = io.StringIO()
    return SafeConsole(file=out, force_terminal=True, color_system="truecolor", width=200, highlight=False), out


def _raw_escapes(written: str) -> list[str]:
    """Escape sequences in ``written`` other than the colour and style codes Rich itself writes."""
    return re.findall(r"\x1b[^\[]|\x1b\[[0-9;?]*[^0-9;?m]", written)


def test_an_event_line_shows_a_hostile_job_name_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    console, out = _terminal()
    monkeypatch.setattr(context, "console", console)
    context.printer(False)(Event(AT, f"c1{CLEAR}", "blocked", f"stop blocked: checkpoints: {HOSTILE}"))
    written = out.getvalue()
    assert _raw_escapes(written) == [] and "\x07" not in written and "\r" not in written and "\u202e" not in written
    assert "\\x1b]0;pwned\\x07" in written and "\\x1b[2J" in written and "\\u202e" in written
    assert "c1\\x1b[2J" in written


def test_the_live_wait_view_shows_outside_text_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    console, out = _terminal()
    view = waiting.WaitView(cluster="c1", action="stop", clock=lambda: 0.0, started=0.0)
    view.take(Event(AT, "c1", "progress", HOSTILE, {"statuses": {"workers": HOSTILE}, "phases": {"workers": CLEAR}}))
    console.print(view.render())
    written = out.getvalue()
    assert _raw_escapes(written) == [] and "\\x1b]0;pwned" in written


@pytest.mark.parametrize(
    "renderable",
    [
        Text(HOSTILE),
        Text.assemble(("bold", "bold"), HOSTILE),
        Text.from_markup("[link=https://evil.example]Approve[/link]"),  # markup in outside text
    ],
)
def test_any_rich_text_or_table_cell_is_escaped_and_never_a_link(renderable: Text) -> None:
    console, out = _terminal()
    table = Table()
    table.add_column("x")
    table.add_row(renderable)
    console.print(renderable)
    console.print(table)
    written = out.getvalue()
    assert _raw_escapes(written) == []
    assert "\x1b]8;" not in written  # no OSC 8 hyperlink, whoever built the text
