"""A window of days per instance group: what ran, what was stopped, what was kept running on purpose,
what a blocked stop left running, what a hold kept, what fell short, and what is planned.

Pure: history entries, the schedule, the groups a stop would keep and the clock come in; segments and
event markers go out. The past comes from the stop/start lines (their per-group outcomes, blocked
stops) and the hold/release lines; the future from the schedule, a hold in force and the protections.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from hyperpod_scheduler.app.history import sentence
from hyperpod_scheduler.schedule import Schedule
from hyperpod_scheduler.store.outcomes import read_outcomes, read_phases
from hyperpod_scheduler.store.records import HistoryEntry, StartPhase

# running | stopped | starting | kept | blocked | held | shortfall | planned-running | planned-stopped | planned-kept
# | planned-held
Kind = str
KINDS: tuple[Kind, ...] = (
    "running",
    "stopped",
    "starting",
    "kept",
    "blocked",
    "held",
    "shortfall",
    "planned-running",
    "planned-stopped",
    "planned-kept",
    "planned-held",
)
LABELS = {
    "running": "running",
    "stopped": "stopped",
    "starting": "starting (phases on hover)",
    "kept": "kept running while stopped (billing)",
    "blocked": "stop blocked: kept running",
    "held": "held by hand",
    "shortfall": "start short of capacity",
    "planned-running": "planned running",
    "planned-stopped": "planned stopped",
    "planned-kept": "planned: kept while stopped",
    "planned-held": "planned: held",
}
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


@dataclass(frozen=True)
class Marker:
    """One history line on the time axis (a stop, a start, a blocked stop, a hold...)."""

    at: datetime
    kind: str  # ok | warn | bad | info (the sentence's tone)
    label: str


def _state_after(entry: HistoryEntry, group: str) -> Kind | None:
    """The group's state from this line on, or None when the line changes nothing for it."""
    if entry.action == "stop" and entry.outcome == "blocked":
        return "blocked"
    o = read_outcomes(entry.detail).get(group)
    if entry.action == "stop":
        if entry.outcome == "noop":
            # Nothing was sent ("already stopped", or every group with nodes protected): the line
            # changes nothing. A cluster whose every stop sent nothing was never stopped, and is not
            # painted "kept running while stopped" (issue 27 item 2).
            return None
        if o is not None and o.current > 0:
            return "kept"  # kept, floored, or a scale-in that failed: these nodes kept billing
        return "stopped"
    if entry.outcome == "noop":
        return None if o is None else "running"
    if o is not None and o.outcome in ("partial", "failed") and o.current < o.target:
        return "shortfall"
    return "running"


def _changes(entries: Iterable[HistoryEntry], now: datetime) -> list[HistoryEntry]:
    return sorted(
        (
            e
            for e in entries
            if e.at < now
            and (
                (e.action in ("stop", "start") and e.outcome in ("ok", "failed", "noop", "blocked"))
                or e.action in ("hold", "release")
            )
        ),
        key=lambda e: e.at,
    )


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


def _hold_end(e: HistoryEntry) -> datetime | None:
    until = e.detail.get("until")
    try:
        return datetime.fromisoformat(until) if isinstance(until, str) and until else None
    except ValueError:
        return None


def group_rows(
    groups: Sequence[str],
    entries: Iterable[HistoryEntry],
    schedule: Schedule | None,
    start: datetime,
    now: datetime,
    end: datetime,
    *,
    kept: Collection[str] = (),
    held_until: datetime | None = None,
    held: bool = False,
    since: datetime | None = None,
    stops_nothing: bool = False,
) -> list[GroupRow]:
    """One row per group from ``start`` to ``end``: recorded states up to ``now``, the plan after it.
    ``kept``: the groups a stop would keep now (their planned nights are "planned-kept"); ``held``
    (until ``held_until``, or the end): a hold in force, painted "planned-held". ``since``: when the
    cluster was created; nothing is drawn before it (no invented history). ``stops_nothing``: a stop
    would send nothing (every group with nodes protected), so its planned nights are planned running."""
    if since is not None and since > start:
        if since >= end:
            return [GroupRow(group, ()) for group in groups]
        start = since
    changes = _changes(entries, now)
    rows = []
    for group in groups:
        # (at, new base state or None, hold on/off or None, note): a hold paints over whatever runs
        # beneath it; a start's phases make the time from its request to its end "starting".
        events: list[tuple[datetime, Kind | None, bool | None, str]] = []
        for e in changes:
            if e.action == "hold":
                events.append((e.at, None, True, ""))
                ends = _hold_end(e)
                if ends is not None:
                    events.append((ends, None, False, ""))
            elif e.action == "release":
                events.append((e.at, None, False, ""))
            else:
                gp = read_phases(e.detail).get(group) if e.action == "start" else None
                if gp is not None and gp.requested < e.at:
                    marks = [f"{label} {gp.at(p):%H:%M}Z" for p, label in _PHASE_LABELS.items() if gp.at(p)]
                    note = f"requested {gp.requested:%H:%M}Z; " + "; ".join(marks)
                    events.append((gp.requested, "starting", None, note))
                events.append((e.at, _state_after(e, group), None, ""))
        events.sort(key=lambda x: x[0])
        base: Kind = "running"
        base_note = ""
        holding = False
        segments: list[Segment] = []
        cursor = start
        for at, state, hold, note in events:
            if at >= now:
                break
            if at > start:
                segments.append(Segment(cursor, at, "held" if holding else base, "" if holding else base_note))
                cursor = at
            if state is not None:
                base, base_note = state, note
            holding = holding if hold is None else hold
        segments.append(Segment(cursor, now, "held" if holding else base, "" if holding else base_note))
        if start < now:
            segments.extend(_plan(schedule, now, end, group in kept, held, held_until, stops_nothing))
        else:
            segments = _plan(schedule, start, end, group in kept, held, held_until, stops_nothing)
        rows.append(GroupRow(group, _merge(segments)))
    return rows


def _plan(
    schedule: Schedule | None,
    now: datetime,
    end: datetime,
    kept: bool,
    held: bool,
    held_until: datetime | None,
    stops_nothing: bool = False,
) -> list[Segment]:
    if schedule is None:
        return []

    def planned(state: str) -> Kind:
        if state == "stopped" and stops_nothing:
            return "planned-running"  # the stop will send nothing: the cluster runs on
        return "planned-kept" if state == "stopped" and kept else f"planned-{state}"

    out: list[Segment] = []
    cursor = now
    if held:
        until = min(held_until or end, end)
        out.append(Segment(now, until, "planned-held"))
        cursor = until
    kind = planned("running" if schedule.is_running(cursor) else "stopped")
    for t in schedule.transitions(cursor, end):
        out.append(Segment(cursor, t.at, kind))
        cursor, kind = t.at, planned(t.state)
    out.append(Segment(cursor, end, kind))
    return out


def markers(entries: Iterable[HistoryEntry], start: datetime, end: datetime) -> list[Marker]:
    """Every stop, start, blocked stop, refusal, hold and release line in the window, as a marker."""
    out = []
    for e in entries:
        if not (start <= e.at <= end) or (e.action not in ("stop", "start", "hold", "release")):
            continue
        if e.outcome == "noop" and e.action == "start":
            continue  # "already at the recorded sizes": nothing happened worth a mark
        said = sentence(e)
        out.append(Marker(e.at, said.tone, f"{e.action}: {said.text}"))
    return sorted(out, key=lambda m: m.at)


__all__ = ["KINDS", "LABELS", "GroupRow", "Marker", "Segment", "group_rows", "markers"]
