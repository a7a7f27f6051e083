"""The state-store interface every backend implements, and the read-modify-CAS helper built on it.

One compare-and-set (``put`` with ``expected_version``) is the only write that protects a record.
It maps onto a SQLite ``UPDATE ... WHERE version=?`` and a DynamoDB conditional write alike, which is
what keeps two runners from losing each other's updates.
"""

from __future__ import annotations

import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store.codec import check_aware, check_key
from hyperpod_scheduler.store.errors import ConflictError
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry, Reach

DEFAULT_RETRIES = 10


@runtime_checkable
class StateStore(Protocol):
    def get(self, key: str) -> ClusterRecord | None:
        """The record under ``key`` with its stored version, or None if there is none."""
        ...

    def put(
        self,
        record: ClusterRecord,
        expected_version: int | None,
        history: Sequence[HistoryEntry] = (),
        *,
        durable: bool = True,
    ) -> ClusterRecord:
        """Compare-and-set. ``expected_version`` None (or 0) means "must not exist yet"; otherwise
        the stored version must equal it. Stores under version expected+1 (or 1) and returns the
        record carrying that version; ``record.version`` itself is ignored. Raises ``ConflictError``.
        ``history`` entries are appended in the same atomic write: on a conflict none is stored, and a
        crash never keeps the record without them (the savings report reads them).

        ``durable`` False: the write must survive the process being killed, but may be lost with a
        power loss as long as every later durable write is lost with it (a store that makes every
        write durable may ignore it). The engine uses it only for what a lost write costs nothing
        to redo (docs/reliability.md, "Durable commits").
        """
        ...

    def list_keys(self) -> list[str]:
        """Every record key, sorted."""
        ...

    def append_history(self, entry: HistoryEntry) -> None: ...

    def history(self, key: str, limit: int = 50) -> list[HistoryEntry]:
        """The newest ``limit`` entries for ``key``, newest first (ties: last appended first)."""
        ...

    def history_all(
        self, since: datetime | None = None, until: datetime | None = None, *, damaged: list[str] | None = None
    ) -> list[HistoryEntry]:
        """Entries of every key with ``since <= at < until``, oldest first (ties: append order). ``damaged``:
        each unreadable entry is said there and left out (else the first raises ``CorruptRecordError``)."""
        ...

    def prune_history(self, before: datetime) -> int:
        """Delete entries with ``at < before``; returns how many went (DynamoDB uses a TTL instead)."""
        ...

    def acquire_lease(self, key: str, owner: str, ttl_s: float, now: datetime) -> bool:
        """Take the per-cluster lease until ``now + ttl_s``. True if free, expired (``now >= expiry``)
        or already ``owner``'s (then it is extended); False if another owner holds it. Lease writes
        need not outlive a power loss (the runners that held them do not either), only a killed process.
        """
        ...

    def renew_lease(self, key: str, owner: str, ttl_s: float, now: datetime) -> bool:
        """Extend a lease ``owner`` still holds. False if it expired or was never ``owner``'s: the
        caller has lost it and must stop acting on the cluster.
        """
        ...

    def release_lease(self, key: str, owner: str) -> bool:
        """Give the lease up; only its owner can. True if a lease was released."""
        ...

    def account_for(self, reach: Reach) -> str | None:
        """The account ``reach`` was found to reach (from a cluster ARN), or None if never looked at."""
        ...

    def bind_account(self, reach: Reach, account: str, *, replace: bool = False) -> str:
        """Remember which account ``reach`` reaches. The first binding wins (two runners learning it at
        once agree, or one sees the other's): returns the account now bound. ``replace`` rebinds on
        purpose (the user moved the profile to another account and said so)."""
        ...

    def accounts_named(self, region: str, name: str) -> dict[str, str]:
        """Every binding of a cluster ``name`` in ``region``: profile -> account."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Closes the store."""
        ...


UpdateFn = Callable[[ClusterRecord | None], ClusterRecord | None]


def update(
    store: StateStore,
    key: str,
    fn: UpdateFn,
    retries: int = DEFAULT_RETRIES,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> ClusterRecord | None:
    """Read ``key``, apply ``fn``, compare-and-set the result; on conflict re-read and try again.

    ``fn`` gets the current record (None if absent) and returns the new one, or None to write
    nothing. It may run several times, so it must be free of side effects. Returns the stored record
    (or the current one if ``fn`` declined). Raises ``ConflictError`` after ``retries`` lost races.
    """
    check_key(key)
    if retries < 0:
        raise UsageError(f"retries: {retries} must be 0 or more")
    for attempt in range(retries + 1):
        current = store.get(key)
        desired = fn(current)
        if desired is None:
            return current
        if desired.key != key:
            raise UsageError(f"update of '{key}' returned a record for '{desired.key}'")
        try:
            return store.put(desired, current.version if current else None)
        except ConflictError:
            if attempt == retries:
                raise
            # Jittered, growing pause so racing writers stop colliding in lockstep.
            sleep(random.uniform(0, min(0.05, 0.0005 * 2**attempt)))
    raise AssertionError("unreachable")  # pragma: no cover


def lease_owner_id() -> str:
    """A lease owner name unique to this process run, readable in a listing (host:pid:random)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lease_expiry(key: str, owner: str, ttl_s: float, now: datetime) -> datetime:
    """Validate lease arguments (shared by every backend) and return the new expiry instant."""
    check_key(key)
    if not isinstance(owner, str) or not owner:
        raise UsageError(f"lease owner: {owner!r} must be a non-empty string")
    if not isinstance(ttl_s, int | float) or not 0 < ttl_s < 7 * 86400:
        raise UsageError(f"lease ttl_s: {ttl_s!r} must be more than 0 and less than a week of seconds")
    return check_aware("now", now) + timedelta(seconds=ttl_s)


def check_limit(limit: int) -> int:
    if not isinstance(limit, int) or limit < 0:
        raise UsageError(f"history limit: {limit!r} must be 0 or more")
    return limit


def check_expected(expected_version: int | None) -> int:
    """The expected version as an int, 0 standing for "must not exist yet"."""
    if expected_version is None:
        return 0
    if not isinstance(expected_version, int) or expected_version < 0:
        raise UsageError(f"expected_version: {expected_version!r} must be None or a version number")
    return expected_version
