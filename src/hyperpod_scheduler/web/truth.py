"""What the pages may claim about a cluster, from the values the cluster page's context already holds.

Kept in one small place so the derivations can be re-pointed at the app layer's one view of the
cluster (issue 27) without touching the templates: when the cluster was created (nothing is drawn
before it), and whether a stop would send anything at all (a cluster whose every group with nodes
is protected is never stopped, and no page calls it stopped).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from hyperpod_scheduler.engine.fleet import Governed
from hyperpod_scheduler.guards.capacity import protections


def created_at(raw: Mapping[str, Any] | None) -> datetime | None:
    """DescribeCluster's CreationTime (botocore parses it to an aware datetime), or None when the
    answer does not say (the timeline then starts where its window starts, as before)."""
    value = raw.get("CreationTime") if raw is not None else None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    return None


def stops_nothing(
    groups: Iterable[Mapping[str, Any]],
    protected: Iterable[Mapping[str, Any]],
    recorded: Mapping[str, Any] | None = None,
) -> bool:
    """True when a stop would send nothing: the cluster has nodes and every group with nodes is kept
    at (or above) its size by a protection. ``groups``: the context's ``groups`` (current, target);
    ``protected``: its ``protected_groups`` (group, keep_at); ``recorded``: its ``recorded_sizes``.
    A group whose recorded size is above its nodes now was walked down by a stop: that stop sent
    something, the cluster is stopped (a start restores it), whatever its protected groups still bill."""
    keep = {str(p["group"]): int(p.get("keep_at") or 0) for p in protected}
    sized = {str(g["group"]): max(int(g.get("current") or 0), int(g.get("target") or 0)) for g in groups}
    if any(int(n or 0) > sized.get(str(name), 0) for name, n in (recorded or {}).items()):
        return False
    with_nodes = [(name, n) for name, n in sized.items() if n > 0]
    return bool(with_nodes) and all(keep.get(name, 0) >= n for name, n in with_nodes)


def never_stopped(
    describe: Callable[[Governed], Any],
    clusters: Iterable[Governed],
    recorded: Callable[[Governed], Mapping[str, Any]] | None = None,
) -> list[str]:
    """The clusters among ``clusters`` whose stop would send nothing (``stops_nothing`` on what
    DescribeCluster shows, their policy's protections and, with ``recorded``, the sizes their record
    keeps); a cluster that cannot be described is left out (not claimed either way)."""
    out = []
    for g in clusters:
        view = describe(g)
        if isinstance(view, Exception) or view is None:
            continue
        groups = [{"group": v.name, "current": v.current, "target": v.target} for v in view.groups]
        kept = [{"group": p.group, "keep_at": p.keep_at} for p in protections(view.groups, g.policy)]
        if stops_nothing(groups, kept, recorded(g) if recorded is not None else None):
            out.append(g.ref.name)
    return out


__all__ = ["created_at", "never_stopped", "stops_nothing"]
