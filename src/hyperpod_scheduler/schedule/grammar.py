"""Parse inline schedule expressions into terms.

Grammar (case-insensitive day names and keywords)::

    expression := term ("," term)*
    term       := "always" | "never" | ISO "-" ISO | [DAYS] HH:MM "-" HH:MM [TZ]
    DAYS       := item ("," item)*        item := Day | Day "-" Day     (ranges may wrap: Fri-Mon)

A comma both separates terms and lists days; a chunk holding only day items therefore belongs to the next
chunk that carries a time range (``Mon,Wed,Fri 08:00-10:00 UTC``). Omitted DAYS means every day.
"""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule.clock import zone
from hyperpod_scheduler.schedule.terms import DAY_NAMES, AbsoluteRange, Always, Never, Term, Window

_DAY_INDEX = {name.lower(): i for i, name in enumerate(DAY_NAMES)}
_TIME_RANGE = re.compile(r"^(\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})$")
_ABSOLUTE_SPLIT = re.compile(r"^(.+?)[-/](\d{4}-\d{2}-\d{2}T.+)$")
_LOOKS_ABSOLUTE = re.compile(r"^\d{4}-\d{2}")


def _fail(message: str, expression: str) -> UsageError:
    return UsageError(f"schedule expression '{expression}': {message}")


def parse_expression(expression: str) -> list[Term]:
    """Every term of an inline expression, in order. Raises UsageError naming the first bad token."""
    if not isinstance(expression, str):
        raise UsageError(f"schedule expression must be text, got {type(expression).__name__}")
    if not expression.strip():
        raise _fail("empty expression (expected e.g. 'Mon-Fri 08:00-19:00 Europe/Berlin')", expression)
    terms: list[Term] = []
    pending: list[str] = []  # day items waiting for the chunk that carries their time range
    for raw in expression.split(","):
        chunk = raw.strip()
        if not chunk:
            raise _fail("empty term between commas", expression)
        tokens = chunk.split()
        if pending and len(tokens) == 1 and (tokens[0].lower() in ("always", "never") or _LOOKS_ABSOLUTE.match(chunk)):
            raise _fail(f"days '{','.join(pending)}' have no time range (expected HH:MM-HH:MM)", expression)
        if len(tokens) == 1 and not pending and tokens[0].lower() in ("always", "never"):
            terms.append(Always() if tokens[0].lower() == "always" else Never())
            continue
        if len(tokens) == 1 and not pending and _LOOKS_ABSOLUTE.match(tokens[0]):
            terms.append(_absolute(tokens[0], expression))
            continue
        if len(tokens) == 1 and not tokens[0][0].isdigit():
            _days(tokens[0], expression)  # validate now so the error names this token
            pending.append(tokens[0])
            continue
        terms.append(_window(tokens, pending, chunk, expression))
        pending = []
    if pending:
        raise _fail(f"days '{','.join(pending)}' have no time range (expected HH:MM-HH:MM)", expression)
    return terms


def _window(tokens: list[str], pending: list[str], chunk: str, expression: str) -> Window:
    rest = list(tokens)
    day_items = list(pending)
    if not rest[0][0].isdigit():
        day_items.append(rest.pop(0))
    if not rest:
        raise _fail(f"'{chunk}' has no time range (expected HH:MM-HH:MM)", expression)
    days: set[int] = set()
    for item in day_items:
        days |= _days(item, expression)
    start, end = _time_range(rest.pop(0), expression)
    tz: ZoneInfo | None = None
    if rest:
        try:
            tz = zone(rest.pop(0))
        except UsageError as exc:
            raise _fail(str(exc), expression) from None
    if rest:
        raise _fail(f"unexpected '{rest[0]}' after the timezone in '{chunk}'", expression)
    text = ",".join([*pending, " ".join(tokens)])
    return Window(frozenset(days) if day_items else frozenset(range(7)), start, end, tz, text)


def _days(item: str, expression: str) -> set[int]:
    parts = item.split("-")
    if len(parts) > 2 or not all(parts):
        raise _fail(f"bad day range '{item}' (expected e.g. Mon, Mon-Fri or Fri-Mon)", expression)
    indexes = []
    for part in parts:
        index = _DAY_INDEX.get(part.lower())
        if index is None:
            raise _fail(f"unknown day '{part}' (expected one of {', '.join(DAY_NAMES)})", expression)
        indexes.append(index)
    if len(indexes) == 1:
        return {indexes[0]}
    first, last = indexes
    span = (last - first) % 7  # a range may wrap past Sunday: Fri-Mon is Fri, Sat, Sun, Mon
    return {(first + i) % 7 for i in range(span + 1)}


def _time_range(token: str, expression: str) -> tuple[int, int]:
    match = _TIME_RANGE.match(token)
    if not match:
        raise _fail(f"bad time range '{token}' (expected HH:MM-HH:MM, e.g. 08:00-19:00)", expression)
    sh, sm, eh, em = (int(g) for g in match.groups())
    if sh > 23 or sm > 59:
        raise _fail(f"bad start time '{token.split('-')[0]}' in '{token}' (00:00 to 23:59)", expression)
    if eh > 24 or em > 59 or (eh == 24 and em != 0):
        raise _fail(f"bad end time '{token.split('-')[1]}' in '{token}' (00:00 to 24:00)", expression)
    start, end = sh * 60 + sm, eh * 60 + em
    if start == end:
        raise _fail(f"empty time range '{token}' (start equals end; use 00:00-24:00 for a whole day)", expression)
    return start, end


def _absolute(token: str, expression: str) -> AbsoluteRange:
    match = _ABSOLUTE_SPLIT.match(token)
    if not match:
        raise _fail(
            f"bad absolute range '{token}' (expected ISO-ISO with offsets, "
            "e.g. 2026-12-24T00:00+01:00-2026-12-27T00:00+01:00)",
            expression,
        )
    start = _instant(match.group(1), token, expression)
    end = _instant(match.group(2), token, expression)
    if end <= start:
        raise _fail(f"absolute range '{token}' ends before it starts", expression)
    return AbsoluteRange(start, end, token)


def _instant(text: str, token: str, expression: str) -> int:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise _fail(f"bad date-time '{text}' in absolute range '{token}'", expression) from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise _fail(f"date-time '{text}' in '{token}' has no UTC offset (add e.g. +01:00 or Z)", expression)
    if value.microsecond:
        raise _fail(f"date-time '{text}' in '{token}': use whole seconds", expression)
    try:
        return int(value.timestamp())
    except (OverflowError, ValueError, OSError):
        raise _fail(f"date-time '{text}' in '{token}' is out of range", expression) from None
