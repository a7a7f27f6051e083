"""Per-group outcomes as a stop or start history line carries them in ``detail["outcomes"]``.

Written as ``{group: {"outcome": "kept", "current": 4, "target": 4}}`` (plus ``"detail"`` when there
is one), so every reader gets typed ``GroupOutcome`` values and nothing parses text. Lines written by
releases before this format hold ``"kept 4/4"`` strings; they still read, here and only here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from hyperpod_scheduler.aws.failures import FailureCause
from hyperpod_scheduler.store.records import GroupOutcome, GroupPhases

# The old line format, "<outcome> <current>/<target>", as runner._settle wrote it.
_LEGACY = re.compile(r"^\s*([a-z]+)\s+(\d+)\s*/\s*(\d+)\s*$")


def outcomes_detail(outcomes: Iterable[GroupOutcome]) -> dict[str, dict[str, Any]]:
    """The ``detail["outcomes"]`` value for a history line."""
    out: dict[str, dict[str, Any]] = {}
    for o in outcomes:
        entry: dict[str, Any] = {"outcome": o.outcome, "current": o.current, "target": o.target}
        if o.detail:
            entry["detail"] = o.detail
        if o.cause is not None:
            entry["cause"] = o.cause.value
        out[o.group] = entry
    return out


def read_outcome(group: str, value: Any) -> GroupOutcome | None:
    """One group's outcome from either form; None for anything unreadable (never a guess)."""
    if isinstance(value, Mapping):
        raw: dict[str, Any] = {k: value.get(k) for k in ("outcome", "current", "target")}
        if isinstance(value.get("detail"), str):
            raw["detail"] = value["detail"]
        if value.get("cause") in set(FailureCause):
            raw["cause"] = FailureCause(value["cause"])
    elif isinstance(value, str) and (m := _LEGACY.match(value)):
        raw = {"outcome": m.group(1), "current": int(m.group(2)), "target": int(m.group(3))}
    else:
        return None
    if any(isinstance(raw[k], bool) for k in ("current", "target")):
        return None  # pydantic would read True as 1
    try:
        return GroupOutcome(group=group, **raw)
    except ValidationError:
        return None


def read_outcomes(detail: Mapping[str, Any]) -> dict[str, GroupOutcome]:
    """Every readable group outcome of a history line's detail, by group."""
    raw = detail.get("outcomes")
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, GroupOutcome] = {}
    for group, value in raw.items():
        parsed = read_outcome(str(group), value)
        if parsed is not None:
            out[str(group)] = parsed
    return out


def read_phases(detail: Mapping[str, Any]) -> dict[str, GroupPhases]:
    """A start line's per-group phases (``detail["phases"]``), typed; unreadable groups are left out."""
    raw = detail.get("phases")
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, GroupPhases] = {}
    for group, value in raw.items():
        if not isinstance(value, Mapping):
            continue
        try:
            out[str(group)] = GroupPhases.model_validate(dict(value))
        except ValidationError:
            continue
    return out


__all__ = ["outcomes_detail", "read_outcome", "read_outcomes", "read_phases"]
