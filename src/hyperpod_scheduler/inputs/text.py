"""Text from outside made safe to show: control characters escaped, long values cut short.

A cluster name, a FailureMessage or a Slurm reason may carry an escape sequence that repaints the
terminal (or hides the line that follows), a carriage return that overwrites what was printed, or a
bidirectional override that reorders it. Everything the CLI prints goes through ``clean`` (the CLI's
consoles apply it to every string), so such characters show as ``\\x1b``, ``\\r``, ``\\u202e``.
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls except tab and newline, DEL, C1 controls, and the bidirectional embedding/override/isolate
# marks (the "Trojan Source" characters); line and paragraph separators break a "one line" error.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_IN_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SURROGATES = re.compile("[\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control character (and, with ``one_line``, newlines and tabs) escaped."""
    text = _SURROGATES.sub(_escape, text)  # unencodable: printing it would raise
    return (_UNSAFE_IN_LINE if one_line else _UNSAFE).sub(_escape, text)


def unsafe_in_line(text: str) -> bool:
    """Whether ``text`` holds anything ``clean(text, one_line=True)`` escapes: a control character (C0
    with tab and newline, DEL, C1), a line or paragraph separator, a bidirectional mark, a lone surrogate."""
    return _UNSAFE_IN_LINE.search(text) is not None or _SURROGATES.search(text) is not None


def unsafe(text: str) -> bool:
    """Whether ``clean`` would change ``text`` (cheaper than cleaning: most text has nothing to escape)."""
    return _UNSAFE.search(text) is not None or _SURROGATES.search(text) is not None


def digits(text: str) -> bool:
    """Whether ``text`` is ASCII digits only, a count ``int()`` reads: str.isdigit also takes '²' (which
    int() refuses) and '١' (which it reads), so a count read from text asks this instead."""
    return text.isascii() and text.isdigit()


def quoted(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: an error names a value, it does not reproduce it."""
    try:
        text = repr(value)
    except Exception:  # an object whose repr fails is still named
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shortened(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, saying how much was cut (a 60 MB FailureMessage is
    reported, not stored or printed whole)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit:,} more characters not kept]"
