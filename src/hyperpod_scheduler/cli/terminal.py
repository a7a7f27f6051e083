"""Rich, for people at a terminal: the consoles every command prints through, and listings as Rich tables.

Kept apart from cli/output.py so that a command printing one line (`schedule check`, `--help`, a JSON
document) never imports Rich; ``output`` hands these names out on first use.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, ConsoleOptions, RenderableType
from rich.errors import MarkupError
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from hyperpod_scheduler.cli.output import safe
from hyperpod_scheduler.inputs.text import clean, unsafe

if TYPE_CHECKING:
    from hyperpod_scheduler.cli.output import Format, Listing


class SafeConsole(Console):
    """A Rich console that escapes control characters in every string before it is styled, and shows a
    string whose brackets are not valid markup (an AWS message with ``[/x]`` in it) as plain text
    instead of failing the command. Emoji codes are left as written: Rich would turn the ``:x:`` of an
    AWS message (or a cluster's tag) into an emoji, so the line would no longer say what AWS said."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("emoji", False)
        super().__init__(*args, **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """Every piece of text on its way out, however it was built (a ``Text`` assembled from an event, a
        table cell, a live view) escaped the same way, and never a hyperlink: ``render_str`` only sees plain
        strings, and a Rich ``Text`` built from a job name used to reach the terminal raw (an OSC title, an
        OSC 8 link, a clear screen). Rich's own escape codes are control segments and styles, added later."""
        for segment in super().render(renderable, options):
            text, style, control = segment
            if control:
                yield segment
                continue
            cleaned = clean(text) if unsafe(text) else text
            if style is not None and style.link:
                style = style.update_link(None)  # no link from markup in outside text ([link=...])
            yield segment if cleaned is text and style is segment.style else Segment(cleaned, style)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        cleaned = safe(text)  # and never a URL's password, whoever put it in the text
        try:
            return super().render_str(cleaned, **kwargs)
        except MarkupError:
            return super().render_str(cleaned, **{**kwargs, "markup": False})


# Rich asks the stream at each print whether it is a terminal; ``soft_wrap`` keeps a piped line whole.
# A closed stdout (`>&-`) is None here: the entry point refuses to run then, but importing must not fail.
console = SafeConsole(highlight=False, soft_wrap=not (sys.stdout is not None and sys.stdout.isatty()))
err_console = SafeConsole(stderr=True, highlight=False, soft_wrap=True)


def rich_table(listing: Listing, fmt: Format) -> Table:
    """The listing as a Rich table for a terminal, within its width (``-o wide`` folds its cells at words
    rather than draw lines wider than the terminal, which the terminal would fold header and all)."""
    columns = [i for i, c in enumerate(listing.columns) if fmt == "wide" or not c.wide_only]
    table = Table(
        title=None if listing.title is None else Text(safe(listing.title)),
        box=box.SIMPLE_HEAD,
        title_justify="left",
        pad_edge=False,
    )
    for i in columns:
        c = listing.columns[i]
        table.add_column(c.header, justify="right" if c.right else "left", no_wrap=c.keep)
    for row in listing.rows:
        table.add_row(*(Text(safe(row[i])) for i in columns))  # cells are text, never markup
    return table


__all__ = ["SafeConsole", "console", "err_console", "rich_table"]
