"""The default store: one SQLite file, safe for several threads and several processes at once.

- WAL journal, so readers never block the writer and a crash mid-write leaves the last commit intact.
- ``synchronous=FULL``: every commit is fsynced before ``put`` returns. With WAL, NORMAL would only
  risk the last commits on power loss, but those are exactly the ones that matter here (the sizes
  recorded just before an UpdateCluster that zeroes the cluster), and the scheduler commits a few
  times per transition, so the cost is invisible.
- Writes take the write lock up front (``BEGIN IMMEDIATE``) and ``busy_timeout`` makes a second
  process wait for it instead of failing; the compare-and-set is an ``UPDATE ... WHERE version=?``.
- The file is created owner-only (0600; SQLite gives its -wal/-shm files the same mode) in a
  directory created 0700 if missing. It holds sizes and history, never credentials.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from hyperpod_scheduler.store.base import check_expected, check_limit, lease_expiry
from hyperpod_scheduler.store.codec import (
    check_aware,
    check_key,
    decode_history,
    decode_record,
    encode_history,
    encode_record,
    to_micros,
)
from hyperpod_scheduler.store.errors import ConflictError, StoreError
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 15.0

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS records (key TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS history ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, at_us INTEGER NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS history_by_key ON history (key, at_us, id)",
    "CREATE INDEX IF NOT EXISTS history_by_time ON history (at_us, id)",
    "CREATE TABLE IF NOT EXISTS leases ( key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at_us INTEGER NOT NULL)",
)


def default_path() -> Path:
    """``$XDG_STATE_HOME/hyperpod-scheduler/state.sqlite``, i.e. ``~/.local/state/...`` by default."""
    base = os.environ.get("XDG_STATE_HOME") or "~/.local/state"
    return Path(base).expanduser() / "hyperpod-scheduler" / "state.sqlite"


class SqliteStore:
    def __init__(self, path: str | Path | None = None, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        self._lock = threading.RLock()
        self._closed = False
        _create_private_file(self.path)
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"state store {self.path}: cannot open: {exc}") from None
        try:
            self._configure(busy_timeout_s)
        except BaseException:
            self._conn.close()
            raise

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    # -- records ---------------------------------------------------------------------------------

    def get(self, key: str) -> ClusterRecord | None:
        check_key(key)
        with self._read() as conn:
            row = conn.execute("SELECT version, body FROM records WHERE key = ?", (key,)).fetchone()
        return None if row is None else decode_record(key, row[1], row[0])

    def put(
        self, record: ClusterRecord, expected_version: int | None, history: Sequence[HistoryEntry] = ()
    ) -> ClusterRecord:
        expected = check_expected(expected_version)
        stored = record.evolve(version=expected + 1)
        body = encode_record(stored)
        rows = [_history_row(e) for e in history]
        with self._write() as conn:
            if expected == 0:
                cur = conn.execute(
                    "INSERT INTO records (key, version, body) VALUES (?, 1, ?) ON CONFLICT (key) DO NOTHING",
                    (record.key, body),
                )
            else:
                cur = conn.execute(
                    "UPDATE records SET version = ?, body = ? WHERE key = ? AND version = ?",
                    (expected + 1, body, record.key, expected),
                )
            if cur.rowcount != 1:
                row = conn.execute("SELECT version FROM records WHERE key = ?", (record.key,)).fetchone()
                raise ConflictError(record.key, expected_version, None if row is None else row[0])
            conn.executemany(_INSERT_HISTORY, rows)
        return stored

    def list_keys(self) -> list[str]:
        with self._read() as conn:
            return [r[0] for r in conn.execute("SELECT key FROM records ORDER BY key")]

    # -- history ---------------------------------------------------------------------------------

    def append_history(self, entry: HistoryEntry) -> None:
        row = _history_row(entry)
        with self._write() as conn:
            conn.execute(_INSERT_HISTORY, row)

    def history(self, key: str, limit: int = 50) -> list[HistoryEntry]:
        check_key(key)
        check_limit(limit)
        with self._read() as conn:
            rows = conn.execute(
                "SELECT key, body FROM history WHERE key = ? ORDER BY at_us DESC, id DESC LIMIT ?",
                (key, limit),
            ).fetchall()
        return [decode_history(k, body) for k, body in rows]

    def history_all(self, since: datetime | None = None, until: datetime | None = None) -> list[HistoryEntry]:
        clauses: list[str] = []
        args: list[Any] = []
        if since is not None:
            clauses.append("at_us >= ?")
            args.append(to_micros(check_aware("since", since)))
        if until is not None:
            clauses.append("at_us < ?")
            args.append(to_micros(check_aware("until", until)))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._read() as conn:
            rows = conn.execute(f"SELECT key, body FROM history {where} ORDER BY at_us, id", args).fetchall()
        return [decode_history(k, body) for k, body in rows]

    def prune_history(self, before: datetime) -> int:
        cut = to_micros(check_aware("before", before))
        with self._write() as conn:
            return conn.execute("DELETE FROM history WHERE at_us < ?", (cut,)).rowcount

    # -- leases ----------------------------------------------------------------------------------

    def acquire_lease(self, key: str, owner: str, ttl_s: float, now: datetime) -> bool:
        expires = to_micros(lease_expiry(key, owner, ttl_s, now))
        with self._write() as conn:
            # One statement: insert, or take over only if it is ours already or has expired.
            cur = conn.execute(
                "INSERT INTO leases (key, owner, expires_at_us) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE"
                " SET owner = excluded.owner, expires_at_us = excluded.expires_at_us"
                " WHERE leases.owner = excluded.owner OR leases.expires_at_us <= ?",
                (key, owner, expires, to_micros(now)),
            )
            return cur.rowcount == 1

    def renew_lease(self, key: str, owner: str, ttl_s: float, now: datetime) -> bool:
        expires = to_micros(lease_expiry(key, owner, ttl_s, now))
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE leases SET expires_at_us = ? WHERE key = ? AND owner = ? AND expires_at_us > ?",
                (expires, key, owner, to_micros(now)),
            )
            return cur.rowcount == 1

    def release_lease(self, key: str, owner: str) -> bool:
        check_key(key)
        with self._write() as conn:
            cur = conn.execute("DELETE FROM leases WHERE key = ? AND owner = ?", (key, owner))
            return cur.rowcount == 1

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _configure(self, busy_timeout_s: float) -> None:
        with self._errors():
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"state store {self.path}: cannot use WAL journaling (got '{mode}')")
            self._conn.execute("PRAGMA synchronous = FULL")
        with self._write() as conn:
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(
                "INSERT OR IGNORE INTO meta (name, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            found = conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()[0]
            # Future migrations go here, inside this same transaction, keyed on ``found``.
            if not str(found).isdigit() or int(found) > SCHEMA_VERSION:
                raise StoreError(
                    f"state store {self.path}: schema version {found!r} is newer than this release "
                    f"understands ({SCHEMA_VERSION}); upgrade hyperpod-scheduler"
                )

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"state store {self.path}: {exc}") from None

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._errors():
            self._check_open()
            yield self._conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._errors():
            self._check_open()
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"state store {self.path}: used after close()")


_INSERT_HISTORY = "INSERT INTO history (key, at_us, body) VALUES (?, ?, ?)"


def _history_row(entry: HistoryEntry) -> tuple[str, int, str]:
    return (entry.key, to_micros(entry.at), encode_history(entry))


def _create_private_file(path: Path) -> None:
    """Create the missing folders (0700) and the empty database file (0600) before SQLite opens it,
    whatever the umask; a file (and its -wal/-shm) that exists with a looser mode is made 0600."""
    try:
        _private_folders(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if file.exists() and file.stat().st_mode & 0o077:
                os.chmod(file, 0o600)
    except OSError as exc:
        raise StoreError(f"state store {path}: cannot create or make private: {exc.strerror or exc}") from None


def _private_folders(folder: Path) -> None:
    # mkdir(parents=True) makes intermediate folders with the umask's mode (0777 under umask 000):
    # each missing folder is made here and set to 0700 explicitly. Folders that exist are left as they are.
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for new in reversed(missing):
        new.mkdir(mode=0o700, exist_ok=True)
        os.chmod(new, 0o700)
