"""A worker run's view of its store that remembers the last record of each cluster it read or wrote.

The run's metrics (``SavedInstances``: the recorded sizes of the clusters held stopped) need every
governed cluster's record after its turn. The turn has just read it (and written it, if it acted), so
reading it again cost one DynamoDB read per cluster per tick: on a quiet fleet most of the table's
reads. The proxy answers from what the turn saw; a cluster whose turn read nothing is read as before.
"""

from __future__ import annotations

import threading
from typing import Any, cast

from hyperpod_scheduler.store.base import StateStore
from hyperpod_scheduler.store.records import ClusterRecord


class Recent:
    """Delegates every call to ``store``; keeps the last record ``get`` returned or ``put`` stored."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._seen: dict[str, ClusterRecord | None] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> ClusterRecord | None:
        record = self._store.get(key)
        with self._lock:
            self._seen[key] = record
        return record

    def put(self, record: ClusterRecord, *args: Any, **kwargs: Any) -> ClusterRecord:
        stored = self._store.put(record, *args, **kwargs)
        with self._lock:
            self._seen[stored.key] = stored
        return stored

    def last(self, key: str) -> ClusterRecord | None:
        """The record as this run last saw it (read now if it never did)."""
        with self._lock:
            if key in self._seen:
                return self._seen[key]
        return self._store.get(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def as_store(self) -> StateStore:
        return cast(StateStore, self)
