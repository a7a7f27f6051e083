"""What the page says after an action (issue 27 item 10): the groups it changes and a link to where its
progress shows. Which buttons a cluster offers is the app layer's (``app.actions.actions``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


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


__all__ = ["result_view"]
