"""The dashboard's action buttons and what the page says after one (issue 27 item 10).

Which buttons a cluster offers, from the state the page already shows: a start in progress still
offers Stop now (a start sent by mistake is stopped from the same page; the stop follows the start
once it settles, as the confirm page says), and a stop in progress still offers Start now. And the
result of an action names the groups it changes and links to where its progress shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperpod_scheduler.web import truth

LABELS = {"hold": "Hold until…", "release": "Release the hold", "stop": "Stop now", "start": "Start now"}


def buttons(state: str, billing: bool, held: bool) -> list[str]:
    """The actions that make sense now: no "Start now" on a running cluster, no "Release" without a
    hold, and neither Stop nor Start taken away while the other is settling."""
    out: list[str] = []
    if state == "starting":
        out.append("stop")
    elif state == "stopping":
        out.append("start")
    else:
        if state != "stopped" or billing:
            out.append("stop")
        if state != "running":
            out.append("start")
    out.append("hold")
    if held:
        out.append("release")
    return out


def for_row(row: Mapping[str, Any]) -> list[str]:
    """``buttons`` for a Fleet row as the page's context holds it (``state``, ``billing``, ``hold``,
    ``protected``). A cluster whose every billing group is protected was never stopped (a stop sends
    nothing): it is offered what a running cluster is, never "Start now"."""
    billing = list(row.get("billing") or [])
    groups = [{"group": b.get("group"), "current": b.get("count")} for b in billing]
    kept = [{"group": p.get("group"), "keep_at": p.get("kept")} for p in row.get("protected") or []]
    recorded = row.get("recorded_sizes") or {}
    state = "running" if truth.stops_nothing(groups, kept, recorded) else str(row.get("state") or "")
    return buttons(state, bool(billing), row.get("hold") is not None)


def for_cluster(c: Mapping[str, Any]) -> list[str]:
    """The cluster page's buttons: its own (``actions``), except that a cluster whose stop sends nothing
    (``groups``, ``protected_groups``) is offered what a running cluster is."""
    if truth.stops_nothing(c.get("groups") or [], c.get("protected_groups") or [], c.get("recorded_sizes") or {}):
        return buttons("running", True, c.get("hold") is not None)
    return list(c.get("actions") or [])


def result_view(
    name: str, action: str, result: Mapping[str, Any], preview: Mapping[str, Any] | None, where: str = ""
) -> dict[str, Any]:
    """The page after an action: its outcome, each group it changes (from the preview taken just before
    it was sent), and a link to the cluster's page, where the timeline and history show its progress."""
    changes = []
    for g in (preview or {}).get("groups") or []:
        if g.get("now") != g.get("after"):
            changes.append(f"{g['group']}: {g['now']} → {g['after']} ({g.get('change') or ''})".replace(" ()", ""))
        elif action == "stop" and g.get("after"):
            changes.append(f"{g['group']}: stays at {g['after']} ({g.get('change') or 'kept'})")
    kind = str(result.get("kind") or "")
    return {
        "title": f"{action} {name}: {kind}",
        "message": str(result.get("message") or ""),
        "changes": changes,
        "progress": f"/clusters/{name}" + (f"?{where}" if where else ""),  # the same cluster, of namesakes
        "progress_text": f"Follow the {action} on {name}'s page (timeline and history)",
        "cluster": name,
        "action": action,
    }


__all__ = ["LABELS", "buttons", "for_cluster", "for_row", "result_view"]
