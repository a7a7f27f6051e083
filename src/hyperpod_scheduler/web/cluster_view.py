"""A cluster's page: its row, groups, protections, the timeline and the history."""

from __future__ import annotations

from datetime import timedelta, tzinfo
from typing import Any

from hyperpod_scheduler.app.actions import never_stopped, nothing_text
from hyperpod_scheduler.app.history import sentence
from hyperpod_scheduler.app.instants import parse_instant
from hyperpod_scheduler.app.status import status_row
from hyperpod_scheduler.app.wording import duration, when
from hyperpod_scheduler.engine import image_update
from hyperpod_scheduler.engine.images import managed_release
from hyperpod_scheduler.engine.stop_forecast import StopForecast
from hyperpod_scheduler.store.outcomes import read_phases
from hyperpod_scheduler.store.records import HistoryEntry
from hyperpod_scheduler.web import truth
from hyperpod_scheduler.web.core import WEEK, DashboardCore
from hyperpod_scheduler.web.fleet_view import available_actions, fleet_row_of
from hyperpod_scheduler.web.places import ANYWHERE, Place
from hyperpod_scheduler.web.svg import timeline_svg
from hyperpod_scheduler.web.timeline import KINDS, LABELS, group_rows, markers

AUDIT_KEYS = ("jobs", "signalled", "drained", "requeued", "resubmit", "checkpoint", "checkpoints", "audit")
WINDOW_BACK = timedelta(days=7)  # the timeline: the week behind and two days ahead
WINDOW_AHEAD = timedelta(days=2)


def cluster(
    dash: DashboardCore,
    name: str,
    start_text: str | None = None,
    viewer: tzinfo | None = None,
    place: Place = ANYWHERE,
) -> dict[str, Any]:
    ctx = dash.context()
    g, ref = dash.target(ctx, name, place)
    now = ctx.now()
    # The page's own look first: the engine records what it finds (engine.reads), so the row read
    # next says "AWS unreachable" only if this look failed too, never beside a fresh describe.
    view = dash.describe_cached(ctx, ref)
    r = status_row(ctx, g, ref.key)
    record = ctx.store.get(ref.key)
    recorded = {n: s.count for n, s in record.snapshot.sizes.items()} if record and record.snapshot else {}
    groups: list[dict[str, Any]] = []
    protected: list[dict[str, Any]] = []
    describe_error = None
    # What the schedule's stop (a person's, for a cluster no schedule governs) would send: the planner's
    # and the guards' answer, the one the Fleet page, the stop preview and `plan` show.
    forecast = dash.stop_forecast(ctx, ref, g.schedule if g is not None else None)
    known = forecast if isinstance(forecast, StopForecast) else None
    row = {**fleet_row_of(r, None, now), "actions": available_actions(r, forecast)}
    created = None if isinstance(view, Exception) else truth.created_at(view.raw)
    images = None
    if not isinstance(view, Exception):
        # The next morning's AMI changes: the engine's one forecast, the one `plan` prints.
        # The groups at zero overnight are the stop forecast's (the one `plan` reads too).
        asleep = {x.group for x in known.groups if x.after == 0} if known is not None else set()
        images = image_update.evening(ctx.engine(), ref, record, view, asleep)
        groups = [
            {
                "group": v.name,
                "instance_type": v.instance_type,
                "current": v.current,
                "target": v.target,
                "status": v.status,
                "release": managed_release(v),
                "image_status": v.details.get("ImageVersionStatus"),
                "image_next": images.for_group(ref.name, v.name),
            }
            for v in view.groups
        ]
        protected = [
            {"group": k.group, "keep_at": k.after, "reason": k.why, "kept_by": k.kept_by}
            for k in (known.kept if known is not None else ())
        ]
    else:
        describe_error = str(view)
        if record and record.snapshot:
            groups = [
                {
                    "group": n,
                    "instance_type": s.instance_type,
                    "current": None,
                    "target": None,
                    "status": None,
                    "release": None,
                    "image_status": None,
                    "image_next": [],
                }
                for n, s in record.snapshot.sizes.items()
            ]
    start = parse_instant(start_text, "from") if start_text else now - WINDOW_BACK
    end = start + WINDOW_BACK + WINDOW_AHEAD
    # The viewer's chosen zone (web/zones.py) when there is one, else the schedule's own.
    zone = viewer or (g.schedule.timezone if g is not None else None)
    history = ctx.store.history(ref.key, limit=500)
    kept = {p["group"] for p in protected if p["keep_at"] > 0}
    hold = r.hold
    rows = group_rows(
        [x["group"] for x in groups],
        history,
        g.schedule if g is not None else None,
        start,
        now,
        end,
        kept=kept,
        held=hold is not None,
        held_until=hold.until if hold is not None else None,
        since=created,
        stops_nothing=known is not None and never_stopped(known, recorded),
    )
    marks = markers(history, start, end)
    lead = ctx.lead_for(g) if g is not None else None
    used = {seg.kind for x in rows for seg in x.segments}
    return {
        **row,
        "where": dash.address(
            ctx, name, ref, governed=g is not None
        ),  # what its links carry when another cluster has its name
        "governed": g is not None,
        "groups": groups,
        "protected_groups": protected,
        "describe_error": describe_error,
        "recorded_sizes": recorded,
        "at_stop": None
        if known is None
        else {
            "outcome": known.outcome,
            "reason": known.reason,
            "nothing": nothing_text(known),
            "never_stopped": never_stopped(known, recorded),
        },
        # None: the cluster could not be described, so the next morning's AMI changes are not known.
        "images": None if images is None else {**images.as_json(), "lines": images.lines(ref.name)},
        "ready_by": {
            "enabled": bool(g is not None and g.schedule.ready_by),
            "lead_minutes": round(lead.lead.total_seconds() / 60, 1) if lead else 0.0,
            "why": lead.why if lead else "not governed: no schedule",
        },
        "timeline": {
            "from": start.isoformat(),
            "to": end.isoformat(),
            "now": now.isoformat(),
            "earlier": (start - WEEK).isoformat(),
            "later": (start + WEEK).isoformat(),
            "range_text": f"{when(start, zone)} to {when(end, zone)}",
            "legend": [{"kind": k, "label": LABELS[k]} for k in KINDS if k in used],
            "groups": [
                {
                    "group": r.group,
                    "segments": [
                        {"from": s.start.isoformat(), "to": s.end.isoformat(), "kind": s.kind} for s in r.segments
                    ],
                }
                for r in rows
            ],
            "markers": [{"at": m.at.isoformat(), "kind": m.kind, "label": m.label} for m in marks],
            "created": created.isoformat() if created else None,
            "svg": timeline_svg(rows, start, end, now, marks, zone, since=created),
        },
        "history": [history_row(e, zone) for e in history[:50]],
        "checkpoint_audits": audits(history),
    }


def history_row(e: HistoryEntry, zone: Any = None) -> dict[str, Any]:
    said = sentence(e)
    started = read_phases(e.detail)
    return {
        "at": e.at.isoformat(),
        "when": when(e.at),
        "local": when(e.at, zone) if zone is not None else "",
        "action": e.action,
        "actor": e.actor,
        "outcome": e.outcome,
        "duration_s": e.duration_s,
        "duration_text": duration(e.duration_s),
        "sentence": said.text,
        "tone": said.tone,
        "outcomes": [o.model_dump(mode="json") for o in said.outcomes],
        "detail": e.detail,
        "phases": {g: p.model_dump(mode="json") for g, p in started.items()},
    }


def audits(history: list[HistoryEntry]) -> list[dict[str, Any]]:
    """Every checkpoint-audit verdict the history carries (a blocked stop's, a drain's), newest first."""
    out = []
    for e in history:
        verdicts = [v for v in e.detail.get("verdicts") or [] if isinstance(v, dict)]
        old_style = any(k in e.detail for k in AUDIT_KEYS)
        if not verdicts and not old_style:
            continue
        for v in verdicts or [e.detail]:
            jobs = [j for j in v.get("jobs") or [] if isinstance(j, dict)]
            out.append(
                {
                    "at": e.at.isoformat(),
                    "when": when(e.at),
                    "action": e.action,
                    "outcome": e.outcome,
                    "guard": v.get("guard", "checkpoints"),
                    "decision": v.get("decision", e.outcome),
                    "reason": " ".join(str(v.get("reason") or e.detail.get("reason") or "").split()),
                    "jobs": [
                        {
                            "job": str(j.get("job_id", "")),
                            "name": str(j.get("name", "")),
                            "user": str(j.get("user", "")),
                            "location": str(j.get("location", "") or "-"),
                            "newest": str(j.get("newest") or "none"),
                        }
                        for j in jobs
                    ],
                }
            )
    return out
