"""A week per instance group: what ran, what was stopped, what fell short, and what is planned.

Pure: history entries, the schedule and the clock come in; segments go out. The past comes from the
settled stop/start entries (their per-group outcomes), the future from the schedule's transitions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from hyperpod_scheduler.schedule import Schedule
from hyperpod_scheduler.store.outcomes import read_outcomes, read_phases
from hyperpod_scheduler.store.records import HistoryEntry, StartPhase

# running | stopped | starting | shortfall | planned-running | planned-stopped
Kind = str
_PHASE_LABELS: dict[StartPhase, str] = {
    "launched": "launched",
    "lifecycle": "lifecycle setup passed",
    "health_checks": "health checks passed",
    "slurm": "joined Slurm",
}


@dataclass(frozen=True)
class Segment:
    start: datetime
    end: datetime
    kind: Kind
    note: str = ""  # a starting segment: when each phase was passed


@dataclass(frozen=True)
class GroupRow:
    group: str
    segments: tuple[Segment, ...]


def _state_after(entry: HistoryEntry, group: str) -> Kind:
    o = read_outcomes(entry.detail).get(group)
    if entry.action == "stop":
        if o is not None and o.current > 0:
            return "running"  # kept, floored, or a scale-in that failed: these nodes kept billing
        return "stopped"
    if o is not None and o.outcome in ("partial", "failed") and o.current < o.target:
        return "shortfall"
    return "running"


def _merge(segments: Iterable[Segment]) -> tuple[Segment, ...]:
    out: list[Segment] = []
    for s in segments:
        if s.end <= s.start:
            continue
        if out and out[-1].kind == s.kind and out[-1].end == s.start and not s.note and not out[-1].note:
            out[-1] = Segment(out[-1].start, s.end, s.kind)
        else:
            out.append(s)
    return tuple(out)


def group_rows(
    groups: Sequence[str],
    entries: Iterable[HistoryEntry],
    schedule: Schedule | None,
    start: datetime,
    now: datetime,
    end: datetime,
) -> list[GroupRow]:
    """One row per group from ``start`` to ``end``: recorded states up to ``now``, the plan after it."""
    changes = sorted(
        (e for e in entries if e.action in ("stop", "start") and e.outcome in ("ok", "failed") and e.at < now),
        key=lambda e: e.at,
    )
    rows = []
    for group in groups:
        state: Kind = "running"
        points: list[tuple[datetime, Kind, str]] = []
        for e in changes:
            if e.at <= start:
                state = _state_after(e, group)
                continue
            gp = read_phases(e.detail).get(group) if e.action == "start" else None
            if gp is not None and start < gp.requested < e.at:
                # From the request until the start settled the group was coming up, phase by phase.
                marks = [f"{label} {gp.at(p):%H:%M}Z" for p, label in _PHASE_LABELS.items() if gp.at(p)]
                points.append((gp.requested, "starting", f"requested {gp.requested:%H:%M}Z; " + "; ".join(marks)))
            points.append((e.at, _state_after(e, group), ""))
        segments: list[Segment] = []
        cursor, note = start, ""
        for at, kind, why in sorted(points, key=lambda p: p[0]):
            segments.append(Segment(cursor, at, state, note))
            cursor, state, note = at, kind, why
        segments.append(Segment(cursor, now, state, note))
        if schedule is not None:
            planned = "planned-running" if schedule.is_running(now) else "planned-stopped"
            cursor = now
            for t in schedule.transitions(now, end):
                segments.append(Segment(cursor, t.at, planned))
                cursor, planned = t.at, f"planned-{t.state}"
            segments.append(Segment(cursor, end, planned))
        rows.append(GroupRow(group, _merge(segments)))
    return rows
