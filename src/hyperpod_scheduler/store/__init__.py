"""The state store: recorded sizes, last applied state, action history, leases.

``open_store`` picks a backend from a URL or path; everything else talks to the ``StateStore``
protocol, so the DynamoDB backend (issue 6) plugs in here without touching the engine.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from hyperpod_scheduler.config.paths import MEMORY, SCHEME, STATE_ENV, local_state, state_location
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store.base import StateStore, lease_owner_id, update
from hyperpod_scheduler.store.errors import ConflictError, CorruptRecordError, StoreError
from hyperpod_scheduler.store.memory import MemoryStore
from hyperpod_scheduler.store.records import (
    ClusterRecord,
    GroupOutcome,
    GroupSize,
    HistoryEntry,
    Hold,
    PendingAction,
    Snapshot,
    cluster_key,
    request_digest,
)
from hyperpod_scheduler.store.sqlite import SqliteStore, default_path

ENV_VAR = STATE_ENV
_SCHEME = SCHEME

__all__ = [
    "ENV_VAR",
    "ClusterRecord",
    "ConflictError",
    "CorruptRecordError",
    "GroupOutcome",
    "GroupSize",
    "HistoryEntry",
    "Hold",
    "MemoryStore",
    "PendingAction",
    "Snapshot",
    "SqliteStore",
    "StateStore",
    "StoreError",
    "cluster_key",
    "default_path",
    "lease_owner_id",
    "open_store",
    "request_digest",
    "update",
]


def open_store(url_or_path: str | os.PathLike[str] | None = None) -> StateStore:
    """Open the store named by ``url_or_path``, else by ``$HYPERPOD_SCHEDULER_STATE``, else the
    default SQLite file. Accepted: ``memory:``, ``sqlite:///abs/path`` (``sqlite:rel/path`` too),
    ``dynamodb://TABLE[?region=REGION]``, or a plain file path.
    """
    location = state_location(url_or_path)
    if re.search(r"[\x00-\x1f\x7f]", location):  # SQLite and the OS would fail on it halfway
        shown = location.encode("unicode_escape").decode()[:80]
        raise UsageError(f"state store '{shown}': contains a control character (NUL, newline, ...)")
    local = local_state(location)
    if local == MEMORY:
        return MemoryStore()
    if isinstance(local, Path):
        return SqliteStore(local)
    if location.startswith("sqlite:"):
        raise UsageError(f"state store '{location}': the sqlite URL names no file")
    scheme = _SCHEME.match(location)
    name = scheme.group(1).lower() if scheme else ""
    if name == "dynamodb":
        return _open_dynamodb(location)
    raise UsageError(f"state store '{location}': unknown scheme '{name}' (use memory:, sqlite:/// or a path)")


def _open_dynamodb(location: str) -> StateStore:
    from hyperpod_scheduler.store.dynamodb import DynamoDBStore  # boto3 only when asked for

    parts = urlsplit(location)
    table = parts.netloc or parts.path.lstrip("/")
    if not table:
        raise UsageError(f"state store '{location}': the dynamodb URL names no table (dynamodb://TABLE)")
    query = parse_qs(parts.query)
    unknown = sorted(set(query) - {"region"})
    if unknown:
        raise UsageError(f"state store '{location}': unknown option '{unknown[0]}' (only region=)")
    region = query.get("region", [None])[-1]
    return DynamoDBStore(table, region=region)
