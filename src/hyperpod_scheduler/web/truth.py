"""When a cluster was created, from DescribeCluster: the timeline draws nothing before it.

Whether a stop would send anything at all (a cluster whose every group with nodes is kept is never
stopped, and no page calls it stopped) is the app layer's: ``app.actions.never_stopped``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


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


__all__ = ["created_at"]
