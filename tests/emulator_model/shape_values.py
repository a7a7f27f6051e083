"""Hypothesis strategies that draw a valid value for any botocore shape (types, bounds, enums, patterns)."""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime
from typing import Any

from botocore.model import ListShape, MapShape, Shape, StringShape, StructureShape
from hypothesis import strategies as st

from hyperpod_scheduler.emulator.shapes import shape

MAX_ITEMS = 2  # lists and maps: enough to be more than one, few enough to stay quick
MAX_DEPTH = 8


def _string(s: StringShape) -> st.SearchStrategy[str]:
    if s.enum:
        return st.sampled_from(list(s.enum))
    lo = int(s.metadata.get("min", 0))
    hi = int(s.metadata.get("max", max(lo, 24)))
    pattern = s.metadata.get("pattern")
    if pattern:
        try:
            re.compile(pattern)
        except re.error:
            pattern = None
    if pattern:
        return st.from_regex(pattern, fullmatch=True).filter(lambda v: lo <= len(v) <= hi)
    return st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=max(lo, 1), max_size=min(hi, 24))


def value_of(s: Shape, depth: int = 0) -> st.SearchStrategy[Any]:
    """A strategy for values of shape ``s`` that the model accepts."""
    if isinstance(s, StructureShape):
        names = list(s.members)
        if s.metadata.get("union"):
            return st.sampled_from(names).flatmap(lambda n: value_of(s.members[n], depth + 1).map(lambda v: {n: v}))
        required = set(s.required_members)
        if depth >= MAX_DEPTH:
            names = [n for n in names if n in required]
        parts = {n: value_of(s.members[n], depth + 1) for n in names}
        return st.fixed_dictionaries(
            {n: p for n, p in parts.items() if n in required},
            optional={n: p for n, p in parts.items() if n not in required},
        )
    if isinstance(s, ListShape):
        lo = int(s.metadata.get("min", 0))
        hi = min(int(s.metadata.get("max", MAX_ITEMS)), max(lo, MAX_ITEMS))
        return st.lists(value_of(s.member, depth + 1), min_size=lo, max_size=hi)
    if isinstance(s, MapShape):
        lo = int(s.metadata.get("min", 0))
        hi = min(int(s.metadata.get("max", MAX_ITEMS)), max(lo, MAX_ITEMS))
        return st.dictionaries(value_of(s.key, depth + 1), value_of(s.value, depth + 1), min_size=lo, max_size=hi)
    if isinstance(s, StringShape):
        return _string(s)
    if s.type_name in ("integer", "long"):
        lo = int(s.metadata.get("min", 0))
        hi = int(s.metadata.get("max", lo + 1000))
        return st.integers(lo, hi)
    if s.type_name == "boolean":
        return st.booleans()
    if s.type_name == "timestamp":
        return st.datetimes(datetime(2026, 1, 1), datetime(2030, 12, 31), timezones=st.just(UTC)).map(
            lambda t: t.replace(microsecond=0)
        )
    if s.type_name in ("double", "float"):
        return st.floats(0, 1000, allow_nan=False)
    raise AssertionError(f"no strategy for {s.type_name} shape {s.name}")


@functools.cache
def member_value(structure: str, member: str) -> st.SearchStrategy[Any]:
    s = shape(structure)
    assert isinstance(s, StructureShape)
    return value_of(s.members[member])
