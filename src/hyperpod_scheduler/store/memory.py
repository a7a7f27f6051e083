"""An in-memory, thread-safe store for tests and dry runs.

It keeps records as encoded JSON, like the durable backends, so callers can never alias a stored
record and the contract tests exercise the same encoding path everywhere.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType

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
from hyperpod_scheduler.store.errors import ConflictError, StoreError
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry, Reach


@dataclass(frozen=True)
class _Row:
    version: int
    body: str


@dataclass(frozen=True)
class _HistoryRow:
    seq: int
    at_us: int
    key: str
    body: str


@dataclass(frozen=True)
class _Lease:
    owner: str
    expires_at: datetime


class MemoryStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, _Row] = {}
        self._history: list[_HistoryRow] = []
        self._leases: dict[str, _Lease] = {}
        self._accounts: dict[Reach, str] = {}
        self._seq = itertools.count()
        self._closed = False

    def __repr__(self) -> str:
        return "MemoryStore()"

    def get(self, key: str) -> ClusterRecord | None:
        check_key(key)
        with self._lock:
            self._check_open()
            row = self._records.get(key)
        return None if row is None else decode_record(key, row.body, row.version)

    def put(
        self,
        record: ClusterRecord,
        expected_version: int | None,
        history: Sequence[HistoryEntry] = (),
        *,
        durable: bool = True,  # nothing here outlives the process anyway
    ) -> ClusterRecord:
        new_version = check_expected(expected_version) + 1
        stored = record.at_version(new_version)
        body = encode_record(stored)
        entries = [(e, encode_history(e)) for e in history]
        with self._lock:
            self._check_open()
            row = self._records.get(record.key)
            actual = None if row is None else row.version
            if actual != (expected_version or None):
                raise ConflictError(record.key, expected_version, actual)
            self._records[record.key] = _Row(new_version, body)
            for entry, entry_body in entries:
                self._append(entry, entry_body)
        return stored

    def list_keys(self) -> list[str]:
        with self._lock:
            self._check_open()
            return sorted(self._records)

    def append_history(self, entry: HistoryEntry) -> None:
        row_body = encode_history(entry)
        with self._lock:
            self._check_open()
            self._append(entry, row_body)

    def _append(self, entry: HistoryEntry, body: str) -> None:
        self._history.append(_HistoryRow(next(self._seq), to_micros(entry.at), entry.key, body))

    def history(self, key: str, limit: int = 50) -> list[HistoryEntry]:
        check_key(key)
        check_limit(limit)
        with self._lock:
            self._check_open()
            rows = [r for r in self._history if r.key == key]
        rows.sort(key=lambda r: (r.at_us, r.seq), reverse=True)
        return [decode_history(r.key, r.body) for r in rows[:limit]]

    def history_all(
        self, since: datetime | None = None, until: datetime | None = None, *, damaged: list[str] | None = None
    ) -> list[HistoryEntry]:
        low = None if since is None else to_micros(check_aware("since", since))
        high = None if until is None else to_micros(check_aware("until", until))
        with self._lock:
            self._check_open()
            rows = [r for r in self._history if (low is None or r.at_us >= low) and (high is None or r.at_us < high)]
        rows.sort(key=lambda r: (r.at_us, r.seq))
        return decode_histories(((r.key, r.body) for r in rows), damaged)

    def prune_history(self, before: datetime) -> int:
        cut = to_micros(check_aware("before", before))
        with self._lock:
            self._check_open()
            kept = [r for r in self._history if r.at_us >= cut]
            gone = len(self._history) - len(kept)
            self._history = kept
        return gone

    def acquire_lease(self, key: str, owner: str, ttl_s: float, now: datetime) -> bool:
        expires = lease_expiry(key, owner, ttl_s, now)
        with self._lock:
            self._check_open()
            held = self._leases.get(key)
            if held is not None and held.owner != owner and now < held.expires_at:
                return False
            self._leases[key] = _Lease(owner, expires)
            return True

    def renew_lease(self, key: str, owner: str, ttl_s: float, now: datetime) -> bool:
        expires = lease_expiry(key, owner, ttl_s, now)
        with self._lock:
            self._check_open()
            held = self._leases.get(key)
            if held is None or held.owner != owner or now >= held.expires_at:
                return False
            self._leases[key] = _Lease(owner, expires)
            return True

    def release_lease(self, key: str, owner: str) -> bool:
        check_key(key)
        with self._lock:
            self._check_open()
            held = self._leases.get(key)
            if held is None or held.owner != owner:
                return False
            del self._leases[key]
            return True

    def account_for(self, reach: Reach) -> str | None:
        check_reach(reach)
        with self._lock:
            self._check_open()
            return self._accounts.get(reach)

    def bind_account(self, reach: Reach, account: str, *, replace: bool = False) -> str:
        check_reach(reach)
        check_account(account)
        with self._lock:
            self._check_open()
            if replace or reach not in self._accounts:
                self._accounts[reach] = account
            return self._accounts[reach]

    def accounts_named(self, region: str, name: str) -> dict[str, str]:
        with self._lock:
            self._check_open()
            return {r.profile: a for r, a in self._accounts.items() if (r.region, r.name) == (region, name)}

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("state store: used after close()")

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
