"""The emulator's state file (SQLite): one row per cluster, one per cluster event, and a few counters.

A request rewrites only the clusters it changed (plus the new events and the small meta row), so a
1,000-cluster fleet stays quick. Scheduled changes live inside their cluster's row; the heap is
rebuilt from them on load, and capacity in use is recounted from the nodes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from hyperpod_scheduler.emulator.model_state import ClusterEvent
from hyperpod_scheduler.errors import UsageError

SCHEMA_VERSION = 1


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$dt": value.isoformat()}
    raise TypeError(f"cannot store {type(value).__name__}")


def _decode(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and "$dt" in obj:
        return datetime.fromisoformat(obj["$dt"])
    return obj


def dumps(value: Any) -> str:
    return json.dumps(value, default=_encode, separators=(",", ":"))


def loads(text: str) -> Any:
    return json.loads(text, object_hook=_decode)


class StateStore:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(
                """
                CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS clusters (arn TEXT PRIMARY KEY, data TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS events (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    cluster_arn TEXT NOT NULL,
                    data TEXT NOT NULL
                );
                CREATE INDEX IF NOT EXISTS events_by_cluster ON events (cluster_arn, seq);
                """
            )
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"state file {self.path}: cannot open it as SQLite ({exc})") from exc
        version = self.meta().get("schema_version")
        if version is not None and version != SCHEMA_VERSION:
            raise UsageError(f"state file {self.path}: schema version {version}, expected {SCHEMA_VERSION}")

    def meta(self) -> dict[str, Any]:
        return {k: loads(v) for k, v in self.conn.execute("SELECT key, value FROM meta")}

    def clusters(self) -> list[dict[str, Any]]:
        return [loads(row[0]) for row in self.conn.execute("SELECT data FROM clusters")]

    def events(self) -> dict[str, list[ClusterEvent]]:
        out: dict[str, list[ClusterEvent]] = {}
        for arn, data in self.conn.execute("SELECT cluster_arn, data FROM events ORDER BY seq"):
            out.setdefault(arn, []).append(ClusterEvent.from_dict(loads(data)))
        return out

    def save(
        self,
        clusters: Iterable[tuple[str, dict[str, Any]]],
        removed: Iterable[str],
        events: Iterable[tuple[str, ClusterEvent]],
        meta: dict[str, Any],
    ) -> None:
        cur = self.conn.cursor()
        cur.execute("BEGIN")
        try:
            cur.executemany(
                "INSERT OR REPLACE INTO clusters (arn, data) VALUES (?, ?)",
                [(arn, dumps(data)) for arn, data in clusters],
            )
            gone = [(arn,) for arn in removed]
            cur.executemany("DELETE FROM clusters WHERE arn = ?", gone)
            cur.executemany("DELETE FROM events WHERE cluster_arn = ?", gone)
            cur.executemany(
                "INSERT INTO events (cluster_arn, data) VALUES (?, ?)",
                [(arn, dumps(ev.to_dict())) for arn, ev in events],
            )
            cur.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                [(k, dumps(v)) for k, v in {**meta, "schema_version": SCHEMA_VERSION}.items()],
            )
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise

    def clear(self) -> None:
        self.conn.executescript("BEGIN; DELETE FROM clusters; DELETE FROM events; DELETE FROM meta; COMMIT;")

    def close(self) -> None:
        self.conn.close()
