"""History lines as sentences a person reads, with their per-group outcomes as typed values.

Every face shows the same words: ``history`` on the command line, the cluster page, the shared HTML
report and the fleet page's "this week". Pure: entries in, sentences out; nothing is parsed from text
(outcomes come from ``store.outcomes``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import ValidationError

from hyperpod_scheduler.app.wording import duration, when, when_seen_at
from hyperpod_scheduler.engine.images import line as image_line
from hyperpod_scheduler.engine.phases import summary as phase_summary
from hyperpod_scheduler.store.outcomes import read_outcomes, read_phases
from hyperpod_scheduler.store.records import GroupOutcome, HistoryEntry, ImageUpdate

Tone = Literal["ok", "info", "warn", "bad"]
NotableKind = Literal["blocked", "shortfall", "refused", "failed", "ami", "held", "manual"]
# Keys of a line's detail that the sentence already says, or that only the cost report reads.
_SAID = {
    "outcomes",
    "message",
    "reason",
    "sizes",
    "kept",
    "verdicts",
    "error",
    "state",
    "until",
    "members",
    "phases",
    "ready_for",
    "audit",
    "image_updates",
    "releases",
}


@dataclass(frozen=True)
class Sentence:
    text: str
    tone: Tone
    outcomes: tuple[GroupOutcome, ...] = ()


def _groups(outcomes: Iterable[GroupOutcome]) -> str:
    parts = []
    for o in outcomes:
        if o.outcome in ("restored", "stopped"):
            parts.append(f"{o.group} {o.outcome} {o.current}/{o.target}")
        elif o.outcome == "kept":
            parts.append(f"{o.group} kept at {o.current}")
        else:  # partial, failed: say how many came back of how many wanted
            parts.append(f"{o.group} {o.outcome}: {o.current} of {o.target}")
    return ", ".join(parts)


def read_image_updates(detail: Mapping[str, Any]) -> list[ImageUpdate]:
    """A start's typed AMI changes; a damaged entry is left out rather than failing the whole line."""
    raw = detail.get("image_updates")
    out = []
    for u in raw if isinstance(raw, list) else []:
        with contextlib.suppress(ValidationError):
            out.append(ImageUpdate.model_validate(u))
    return out


def _text(detail: Mapping[str, Any], key: str) -> str:
    value = detail.get(key)
    return " ".join(str(value).split()) if value not in (None, "") else ""


def _extra(detail: Mapping[str, Any]) -> str:
    rest = [f"{k} {v}" for k, v in detail.items() if k not in _SAID and isinstance(v, str | int | float)]
    return f" ({'; '.join(rest)})" if rest else ""


def sentence(e: HistoryEntry) -> Sentence:
    """One line of the history as a sentence: what happened and, per group, how it ended."""
    d = e.detail
    outcomes = tuple(read_outcomes(d).values())
    took = f" in {duration(e.duration_s)}" if e.duration_s else ""
    reason, message, error = _text(d, "reason"), _text(d, "message"), _text(d, "error")
    if e.action in ("stop", "start"):
        line = _transition(e, outcomes, took, reason, message, error)
        moved = read_image_updates(d)
        if moved:  # the AMI releases the start moved groups to while the cluster was at zero
            line = Sentence(f"{line.text}; {image_line(moved)}", line.tone, line.outcomes)
        started = read_phases(d)
        if started:  # how long each phase of the start took, per group
            return Sentence(f"{line.text}; phases: {phase_summary(started)}", line.tone, line.outcomes)
        return line
    if e.action == "hold":
        until = d.get("until")
        ends = datetime.fromisoformat(until) if isinstance(until, str) and until else None
        end = f" until {when_seen_at(ends, e.at)}" if ends is not None else " until released"
        why = f": {reason}" if reason else ""
        return Sentence(f"held {d.get('state', 'running')}{end}{why}", "info")
    if e.action == "image" and e.outcome == "allowed":
        allowed = ", ".join(str(r) for r in d.get("releases") or [])
        return Sentence(f"{d.get('group')} may take AMI {allowed} again (by {e.actor})", "info")
    if e.action == "release":
        return Sentence("hold released: the schedule is in charge again", "info")
    if e.action == "forget":
        sizes = d.get("sizes")
        forgot = ", ".join(f"{g} {n}" for g, n in sizes.items()) if isinstance(sizes, dict) else ""
        return Sentence("recorded sizes forgotten" + (f" ({forgot})" if forgot else ""), "info")
    if e.action.startswith("manual-"):
        what = e.action.removeprefix("manual-")
        asked = f"asked to {what} now" + (f" ({reason})" if reason else "")
        answer = f": {message}" if message else ""
        tone: Tone = "bad" if e.outcome in ("error", "failed", "refused", "blocked") else "info"
        return Sentence(f"{asked}; the engine answered {e.outcome}{answer}", tone)
    said = "; ".join(x for x in (reason, message, error) if x)
    tone = "bad" if e.outcome in ("error", "failed", "refused") else "info"
    return Sentence(f"{e.action} {e.outcome}" + (f": {said}" if said else "") + _extra(d), tone, outcomes)


def _transition(
    e: HistoryEntry, outcomes: tuple[GroupOutcome, ...], took: str, reason: str, message: str, error: str
) -> Sentence:
    groups = _groups(outcomes)
    if e.outcome == "blocked":
        return Sentence(f"{e.action} blocked, the cluster kept running: {reason or message}", "bad", outcomes)
    if e.outcome == "refused":
        return Sentence(f"{e.action} refused, nothing sent: {reason or error or message}", "bad", outcomes)
    if e.outcome == "noop":
        kept = [o for o in outcomes if o.current > 0]
        if kept:
            return Sentence(f"{e.action}: nothing sent ({reason}); still running: {_groups(kept)}", "warn", outcomes)
        return Sentence(f"{e.action}: nothing to do ({reason or message})", "info", outcomes)
    if e.outcome == "failed":
        why = f": {message}" if message and message != "settled" else ""
        return Sentence(f"{e.action} failed{took}: {groups}{why}", "bad", outcomes)
    if e.outcome == "ok":
        verb = "stopped" if e.action == "stop" else "started"
        kept = [o for o in outcomes if o.outcome == "kept" or (e.action == "stop" and o.current > 0)]
        short = [o for o in outcomes if o.outcome in ("partial", "failed")]
        tone: Tone = "warn" if kept or short else "ok"
        text = f"{verb}{took}: {groups}" if groups else f"{verb}{took}"
        audit = _text(e.detail, "audit")
        return Sentence(text + (f"; checkpoint audit {audit}" if audit else ""), tone, outcomes)
    said = "; ".join(x for x in (reason, message, error) if x)
    return Sentence(f"{e.action} {e.outcome}{took}" + (f": {said}" if said else ""), "info", outcomes)


@dataclass(frozen=True)
class Notable:
    """Something an operator should see this week: a blocked stop, a start short of capacity (and
    whether it came back later), a refusal, an AMI change, a hold, a manual action."""

    at: datetime
    key: str
    cluster: str
    kind: NotableKind
    text: str
    resolved: str = ""  # e.g. "restored Wed 2 Dec 08:00 UTC after 2 retries"


def _short(o: GroupOutcome) -> bool:
    return o.outcome in ("partial", "failed") and o.current < o.target


def notable(entries: Sequence[HistoryEntry], cluster_of: Mapping[str, str] | None = None) -> list[Notable]:
    """The week's events worth a flag, oldest first; a run of failed starts is one shortfall, with
    the start that finally restored the cluster (if any) as its resolution."""
    names = cluster_of or {}
    out: list[Notable] = []
    ordered = sorted(entries, key=lambda x: x.at)
    by_key: dict[str, list[HistoryEntry]] = {}
    for e in ordered:
        by_key.setdefault(e.key, []).append(e)
    for key, lines in by_key.items():
        name = names.get(key, key.rsplit("/", 1)[-1])
        i = 0
        while i < len(lines):
            e = lines[i]
            s = sentence(e)
            if e.action == "start" and any(_short(o) for o in s.outcomes):
                j, tries = i, 0
                while j < len(lines) and lines[j].action == "start" and lines[j].outcome == "failed":
                    j, tries = j + 1, tries + 1
                j = max(j, i + 1)
                wanted = sum(o.target for o in s.outcomes)
                got = sum(o.current for o in s.outcomes)
                why = _text(e.detail, "message")
                text = f"start short of capacity: {got} of {wanted} nodes" + (f" ({why})" if why else "")
                resolved = ""
                later = next((x for x in lines[j:] if x.action in ("start", "stop") and x.outcome == "ok"), None)
                if later is not None and later.action == "start":
                    again = f" after {tries} retr{'y' if tries == 1 else 'ies'}" if tries > 1 else ""
                    resolved = f"restored {when(later.at)}{again}"
                elif later is None:
                    resolved = "not restored yet"
                out.append(Notable(e.at, key, name, "shortfall", text, resolved))
                i = j
                continue
            if e.action == "stop" and e.outcome == "blocked":
                out.append(Notable(e.at, key, name, "blocked", s.text))
            elif e.outcome == "refused":
                out.append(Notable(e.at, key, name, "refused", s.text))
            elif e.outcome in ("failed", "error"):
                out.append(Notable(e.at, key, name, "failed", s.text))
            elif e.detail.get("ami_changes"):
                out.append(Notable(e.at, key, name, "ami", f"{s.text}; came back on another AMI"))
            elif e.action == "hold":
                out.append(Notable(e.at, key, name, "held", f"{s.text} (by {e.actor})"))
            elif e.action.startswith("manual-"):
                out.append(Notable(e.at, key, name, "manual", f"{s.text} (by {e.actor})"))
            i += 1
    return sorted(out, key=lambda n: n.at)


__all__ = ["Notable", "Sentence", "notable", "sentence"]
