"""The default store: one SQLite file, safe for several threads and several processes at once.

- WAL journal, so readers never block the writer and a crash mid-write leaves the last commit intact.
  Reads go through a small pool of read connections of their own (one per thread reading at that
  moment), so a read never waits behind a write, nor behind another thread's read.
- Durable commits: a ``put`` (the write-ahead intent, an outcome) does not return before the WAL file
  holding its commit has been fsynced. Lease changes, account bindings, history appends and a ``put(...,
  durable=False)`` (the engine's "sent" mark) are atomic commits that survive the process being killed
  (they are in the WAL as soon as they commit) but are not fsynced on their own. The WAL is one file
  written in order, so the next durable commit's fsync makes every earlier commit durable with it: after
  a power loss the store holds a prefix of its commits, never a later one without an earlier one. What
  such a loss can take back is the argument of docs/reliability.md ("Durable commits"): a lease lapses
  early (its holder lost power too), a "sent" mark is as if the process had died before storing it (the
  next look decides from the cluster's target counts).
- Group commit: every transaction commits with ``synchronous=NORMAL`` (appended to the WAL, not
  fsynced), and a durable one then waits, *outside* the write lock, for an fsync of the WAL that began
  after its commit; one fsync serves every durable commit made while the previous one ran. That is what
  SQLite's ``synchronous=FULL`` does in WAL mode (it fsyncs the WAL after each commit), but under
  ``FULL`` the fsync runs inside COMMIT, holding the write lock, so threads took turns at the disk: with
  8 threads, an fsync per stop set the pace of the tick. A checkpoint that copies the WAL into the
  database fsyncs both first (``NORMAL`` in WAL mode), so a commit checkpointed before its fsync is
  durable either way.
- Writes take the write lock up front (``BEGIN IMMEDIATE``) and ``busy_timeout`` makes a second
  process wait for it instead of failing; the compare-and-set is an ``UPDATE ... WHERE version=?``.
  Writers of one process take turns on one connection (a Python lock hands it over at once; SQLite's
  own busy wait sleeps in steps of up to 100 ms).
- The file is created owner-only (0600; SQLite gives its -wal/-shm files the same mode) in a
  directory created 0700 if missing. It holds sizes and history, never credentials. A file that exists
  is never chmod-ed (it may not be a store at all), and anything but a regular file is refused unopened.
- A store is never silently empty: a new file is built aside with its schema and only then linked
  under its name, so a file that exists always carries the schema. One that is empty (truncated) or
  lacks the schema is refused with its path; only a missing file is created.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from hyperpod_scheduler.config.paths import default_state_path
from hyperpod_scheduler.inputs import files
from hyperpod_scheduler.inputs.text import digits
from hyperpod_scheduler.store.base import check_expected, check_limit, lease_expiry
from hyperpod_scheduler.store.codec import (
    check_account,
    check_aware,
    check_key,
    check_reach,
    decode_histories,
    decode_history,
    decode_record,
    encode_history,
    encode_record,
    to_micros,
)
from hyperpod_scheduler.store.errors import ConflictError, NotAStoreFile, StoreError
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry, Reach

SCHEMA_VERSION = 2  # 2: the accounts table (records keyed by account)
BUSY_TIMEOUT_S = 15.0

TABLES = ("meta", "records", "history", "leases", "accounts")
_ACCOUNTS_TABLE = (
    "CREATE TABLE IF NOT EXISTS accounts (profile TEXT NOT NULL, region TEXT NOT NULL, name TEXT NOT NULL,"
    " account TEXT NOT NULL, PRIMARY KEY (region, name, profile))"
)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS records (key TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS history ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, at_us INTEGER NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS history_by_key ON history (key, at_us, id)",
    "CREATE INDEX IF NOT EXISTS history_by_time ON history (at_us, id)",
    "CREATE TABLE IF NOT EXISTS leases ( key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at_us INTEGER NOT NULL)",
    _ACCOUNTS_TABLE,
)


def default_path() -> Path:
    """``$XDG_STATE_HOME/hyperpod-scheduler/state.sqlite``, i.e. ``~/.local/state/...`` by default."""
    return default_state_path()


class SqliteStore:
    def __init__(self, path: str | Path | None = None, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        self._lock = threading.RLock()  # the write connection, and closing
        self._closed = False
        self._busy_timeout_s = busy_timeout_s
        self._readers: list[sqlite3.Connection] = []  # idle read connections
        self._all_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._commits = 0  # durable commits made through this store (their sequence numbers)
        self._synced = 0  # every durable commit up to this one is fsynced
        self._syncing = False  # an fsync of the WAL is running (its leader will tell the others)
        self._sync_cond = threading.Condition(threading.Lock())
        self._wal_seen: tuple[int, int] | None = None  # (device, inode) of the WAL whose folder entry is synced
        _check_or_create(self.path)
        self._conn = self._connect()
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
        self,
        record: ClusterRecord,
        expected_version: int | None,
        history: Sequence[HistoryEntry] = (),
        *,
        durable: bool = True,
    ) -> ClusterRecord:
        expected = check_expected(expected_version)
        stored = record.at_version(expected + 1)
        body = encode_record(stored)
        rows = [_history_row(e) for e in history]
        if expected == 0:
            sql = "INSERT INTO records (key, version, body) VALUES (?, 1, ?) ON CONFLICT (key) DO NOTHING"
            args: tuple[Any, ...] = (record.key, body)
        else:
            sql = "UPDATE records SET version = ?, body = ? WHERE key = ? AND version = ?"
            args = (expected + 1, body, record.key, expected)
        if rows:
            try:
                with self._write(durable=durable) as conn:
                    changed = conn.execute(sql, args).rowcount
                    if changed != 1:
                        raise _Unchanged  # rolled back: nothing to commit, nor to fsync
                    conn.executemany(_INSERT_HISTORY, rows)
            except _Unchanged:
                pass
        else:
            changed = self._write_one(sql, args, durable=durable)
        if changed != 1:
            with self._read() as conn:  # only for the message: the write above changed nothing
                row = conn.execute("SELECT version FROM records WHERE key = ?", (record.key,)).fetchone()
            raise ConflictError(record.key, expected_version, None if row is None else row[0])
        return stored

    def list_keys(self) -> list[str]:
        with self._read() as conn:
            return [r[0] for r in conn.execute("SELECT key FROM records ORDER BY key")]

    # -- history ---------------------------------------------------------------------------------

    def append_history(self, entry: HistoryEntry) -> None:
        row = _history_row(entry)
        self._write_one(_INSERT_HISTORY, row)

    def history(self, key: str, limit: int = 50) -> list[HistoryEntry]:
        check_key(key)
        check_limit(limit)
        with self._read() as conn:
            rows = conn.execute(
                "SELECT key, body FROM history WHERE key = ? ORDER BY at_us DESC, id DESC LIMIT ?",
                (key, limit),
            ).fetchall()
        return [decode_history(k, body) for k, body in rows]

    def history_all(
        self, since: datetime | None = None, until: datetime | None = None, *, damaged: list[str] | None = None
    ) -> list[HistoryEntry]:
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
        return decode_histories(rows, damaged)

    def prune_history(self, before: datetime) -> int:
        cut = to_micros(check_aware("before", before))
        with self._write() as conn:
            return conn.execute("DELETE FROM history WHERE at_us < ?", (cut,)).rowcount

    # -- leases ----------------------------------------------------------------------------------

    def acquire_lease(self, key: str, owner: str, ttl_s: float, now: datetime) -> bool:
        expires = to_micros(lease_expiry(key, owner, ttl_s, now))
        # One statement: insert, or take over only if it is ours already or has expired.
        taken = self._write_one(
            "INSERT INTO leases (key, owner, expires_at_us) VALUES (?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE"
            " SET owner = excluded.owner, expires_at_us = excluded.expires_at_us"
            " WHERE leases.owner = excluded.owner OR leases.expires_at_us <= ?",
            (key, owner, expires, to_micros(now)),
            durable=False,
        )
        return taken == 1

    def renew_lease(self, key: str, owner: str, ttl_s: float, now: datetime) -> bool:
        expires = to_micros(lease_expiry(key, owner, ttl_s, now))
        renewed = self._write_one(
            "UPDATE leases SET expires_at_us = ? WHERE key = ? AND owner = ? AND expires_at_us > ?",
            (expires, key, owner, to_micros(now)),
            durable=False,
        )
        return renewed == 1

    def release_lease(self, key: str, owner: str) -> bool:
        check_key(key)
        return self._write_one("DELETE FROM leases WHERE key = ? AND owner = ?", (key, owner), durable=False) == 1

    # -- accounts --------------------------------------------------------------------------------

    def account_for(self, reach: Reach) -> str | None:
        check_reach(reach)
        with self._read() as conn:
            row = conn.execute(
                "SELECT account FROM accounts WHERE region = ? AND name = ? AND profile = ?",
                (reach.region, reach.name, reach.profile),
            ).fetchone()
        return None if row is None else str(row[0])

    def bind_account(self, reach: Reach, account: str, *, replace: bool = False) -> str:
        check_reach(reach)
        check_account(account)
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        # A lone statement; if it stored nothing (an earlier binding won), a read outside the write lock:
        # a binding is never removed, so the read finds the one now bound (the earlier one, or a later
        # replacement).
        stored = self._write_one(
            f"{verb} INTO accounts (profile, region, name, account) VALUES (?, ?, ?, ?)",
            (reach.profile, reach.region, reach.name, account),
            durable=False,
        )
        if stored == 1:
            return account
        bound = self.account_for(reach)
        if bound is None:  # pragma: no cover - a binding is never deleted
            raise StoreError(f"state store {self.path}: the account binding of {reach} vanished")
        return bound

    def accounts_named(self, region: str, name: str) -> dict[str, str]:
        with self._read() as conn:
            rows = conn.execute("SELECT profile, account FROM accounts WHERE region = ? AND name = ?", (region, name))
            return {str(p): str(a) for p, a in rows}

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
                with self._readers_lock:
                    for conn in self._all_readers:
                        conn.close()
                    self._readers.clear()
                    self._all_readers.clear()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
        except sqlite3.Error as exc:
            raise StoreError(f"state store {self.path}: cannot open: {exc}") from None
        return conn

    def _configure(self, busy_timeout_s: float) -> None:
        with self._errors():
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"state store {self.path}: cannot use WAL journaling (got '{mode}')")
            # Commits are appended to the WAL unsynced; durable ones are fsynced by _sync_through.
            self._conn.execute("PRAGMA synchronous = NORMAL")
        with self._write() as conn:
            _check_schema(conn, self.path)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"state store {self.path}: {exc}") from None

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """An idle read connection (a new one if every one is busy), given back afterwards. Each
        statement is its own read transaction on the WAL's latest commit: no lock shared with writers."""
        self._check_open()
        with self._readers_lock:
            conn = self._readers.pop() if self._readers else None
        if conn is None:
            conn = self._connect()
            with self._readers_lock:
                if self._closed:  # closed meanwhile: this one would never be closed
                    conn.close()
                    self._check_open()
                self._all_readers.append(conn)
        try:
            with self._errors():
                yield conn
        finally:
            with self._readers_lock:
                if not self._closed:
                    self._readers.append(conn)

    @contextmanager
    def _write(self, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction; with ``durable``, it returns once its commit is fsynced."""
        mine = 0
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
            if durable:
                self._commits += 1
                mine = self._commits
        if durable:
            self._sync_through(mine)

    def _write_one(self, sql: str, args: Sequence[Any], *, durable: bool = True) -> int:
        """One statement as its own transaction (SQLite runs a lone statement atomically, taking the
        write lock for it as ``BEGIN IMMEDIATE`` would); the number of rows it changed. A third of the
        calls of ``_write``: each call into SQLite lets go of the GIL, and getting it back while holding
        the write lock made the other writers queue behind it."""
        mine = 0
        with self._lock, self._errors():
            self._check_open()
            changed = self._conn.execute(sql, args).rowcount
            if durable:
                self._commits += 1
                mine = self._commits
        if durable:
            self._sync_through(mine)
        return changed

    def _sync_through(self, commit: int) -> None:
        """Return once an fsync of the WAL that began after durable commit number ``commit`` has ended.
        The first thread to find none running runs one for everyone committed so far; the others wait
        for it (and run the next one if theirs came too late for it)."""
        with self._sync_cond:
            while self._synced < commit:
                if self._syncing:
                    self._sync_cond.wait()
                    continue
                self._syncing = True
                covers = self._commits  # every one of these committed before the fsync below begins
                self._sync_cond.release()
                try:
                    self._fsync_wal()
                finally:
                    self._sync_cond.acquire()
                    self._syncing = False
                    self._sync_cond.notify_all()
                self._synced = max(self._synced, covers)

    def _fsync_wal(self) -> None:
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            fd = os.open(wal, os.O_RDONLY)
        except FileNotFoundError:
            # The last connection closed and checkpointed it away: the checkpoint fsynced the database.
            return
        except OSError as exc:
            raise StoreError(f"state store {self.path}: committed, but cannot make it durable: {exc}") from None
        try:
            os.fsync(fd)  # any descriptor of the file: fsync acts on the file, whoever wrote to it
            seen = os.fstat(fd)
        except OSError as exc:
            raise StoreError(f"state store {self.path}: committed, but cannot make it durable: {exc}") from None
        finally:
            os.close(fd)
        if self._wal_seen != (seen.st_dev, seen.st_ino):
            _fsync_dir(self.path.parent)  # a new WAL file: its name must survive a power loss too
            self._wal_seen = (seen.st_dev, seen.st_ino)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"state store {self.path}: used after close()")


_INSERT_HISTORY = "INSERT INTO history (key, at_us, body) VALUES (?, ?, ?)"


class _Unchanged(Exception):
    """A compare-and-set found another version: its transaction is rolled back, not committed."""


def _history_row(entry: HistoryEntry) -> tuple[str, int, str]:
    return (entry.key, to_micros(entry.at), encode_history(entry))


def _check_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a database that is not (or no longer) a whole store; migrate an older one in place."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "meta" not in tables:
        raise StoreError(
            f"state store {path}: not a hyperpod-scheduler state store (no meta table); "
            "refusing to use it as a new, empty store (point --state at the right file, or at a new path)"
        )
    row = conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
    found = None if row is None else row[0]
    if found is None or not digits(str(found)):
        raise StoreError(f"state store {path}: its schema version is {found!r}; the file is damaged")
    if int(found) > SCHEMA_VERSION:
        raise StoreError(
            f"state store {path}: schema version {found!r} is newer than this release "
            f"understands ({SCHEMA_VERSION}); upgrade hyperpod-scheduler"
        )
    if int(found) < 2 and "records" in tables:
        # 1 -> 2: records become keyed by account; the migration of each record happens as its
        # cluster is next looked at (engine/identity.py). Here only the table that remembers accounts.
        conn.execute(_ACCOUNTS_TABLE)
        conn.execute("UPDATE meta SET value = '2' WHERE name = 'schema_version'")
        tables.add("accounts")
    missing = [t for t in TABLES if t not in tables]
    if missing:
        raise StoreError(
            f"state store {path}: table '{missing[0]}' is missing; the file is damaged (restore it from a backup)"
        )


def _check_or_create(path: Path) -> None:
    """A file that exists must be a store (checked once it is open); only a missing one is created."""
    try:
        found = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        _create(path)  # a parent that is a file fails there, as "cannot create"
        return
    except OSError as exc:
        raise StoreError(f"state store {path}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(found.st_mode):
        # SQLite would block on a FIFO and write into a device; nothing is opened, nothing is changed.
        raise NotAStoreFile(f"state store {path}: is {files.kind(found.st_mode)}, not a regular file; refused unopened")
    size = found.st_size
    # A file that exists is only read here, so its mode is the owner's choice: never chmod-ed (a --state
    # that names a user's notes.txt by mistake is refused below, and left exactly as it was).
    if size == 0:
        raise StoreError(
            f"state store {path} is empty (0 bytes): it was truncated or never finished; every remembered "
            "size would be lost, so it is not used as a new store (restore it from a backup, or delete it)"
        )


def _create(path: Path) -> None:
    """Build the schema in a private file beside ``path``, then link it under its name.

    The link is atomic and never replaces a file: a crash before it leaves only the aside file, never an
    empty ``path``; two processes creating at once both end up opening whichever link won.
    """
    try:
        _private_folders(path.parent)
    except OSError as exc:
        raise StoreError(f"state store {path}: cannot create: {exc.strerror or exc}") from None
    aside = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.new")
    try:
        try:
            os.close(os.open(aside, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
            conn = sqlite3.connect(aside, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("BEGIN IMMEDIATE")
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute("INSERT INTO meta (name, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                conn.execute("COMMIT")
            finally:
                conn.close()  # the last close checkpoints the WAL into the file and removes it
            fd = os.open(aside, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"state store {path}: cannot create: {getattr(exc, 'strerror', None) or exc}") from None
        try:
            os.link(aside, path)
        except FileExistsError:
            pass  # another process created it first: use theirs
        except OSError as exc:
            raise StoreError(f"state store {path}: cannot create: {exc.strerror or exc}") from None
        _fsync_dir(path.parent)
    finally:
        for leftover in (aside, aside.with_name(aside.name + "-wal"), aside.with_name(aside.name + "-shm")):
            with contextlib.suppress(OSError):  # never made (a parent that is a file), or already gone
                leftover.unlink()


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem lets a directory be opened
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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
