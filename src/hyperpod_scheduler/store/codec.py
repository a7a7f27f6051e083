"""JSON text in and out of the store, shared by every backend so they agree byte for byte.

Decoding failures become ``CorruptRecordError`` naming the key, never a pydantic traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from pydantic import ValidationError

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store.errors import CorruptRecordError
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry, Reach, account_problem, key_problem

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def encode_record(record: ClusterRecord) -> str:
    return record.model_dump_json()


def decode_record(key: str, text: str | bytes, version: int) -> ClusterRecord:
    """The record stored under ``key``; the version column, not the body, is authoritative."""
    try:
        record = ClusterRecord.model_validate_json(text)
    except ValidationError as exc:
        raise CorruptRecordError(key, "record", _first_error(exc)) from None
    if record.key != key:
        raise CorruptRecordError(key, "record", f"its body names key '{record.key}'")
    try:
        return record.at_version(version)
    except ValueError as exc:
        raise CorruptRecordError(key, "record", str(exc)) from None


def encode_history(entry: HistoryEntry) -> str:
    return entry.model_dump_json()


def decode_histories(rows: Iterable[tuple[str, str | bytes]], damaged: list[str] | None) -> list[HistoryEntry]:
    """``history_all``'s entries. ``damaged``: a list to say each unreadable entry in (and leave it out)
    rather than raise for the first, so one damaged line never hides the history of every cluster."""
    out = []
    for key, body in rows:
        try:
            out.append(decode_history(key, body))
        except CorruptRecordError as exc:
            if damaged is None:
                raise
            damaged.append(str(exc))
    return out


def decode_history(key: str, text: str | bytes) -> HistoryEntry:
    try:
        return HistoryEntry.model_validate_json(text)
    except ValidationError as exc:
        raise CorruptRecordError(key, "a history entry", _first_error(exc)) from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "body"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {err['msg']}{more}"


def check_key(key: str) -> str:
    problem = key_problem(key)
    if problem:
        raise UsageError(f"state store key {key!r} {problem}")
    return key


def check_reach(reach: Reach) -> Reach:
    problem = reach.problem() if isinstance(reach, Reach) else "must be a Reach"
    if problem:
        raise UsageError(f"state store: account binding: {problem}")
    return reach


def check_account(account: str) -> str:
    problem = account_problem(account)
    if problem:
        raise UsageError(f"state store: account {account!r} {problem}")
    return account


def check_aware(name: str, value: datetime) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise UsageError(f"{name}: {value!r} must be a timezone-aware datetime")
    return value


def to_micros(value: datetime) -> int:
    """Exact integer microseconds since the epoch: sortable and comparable across offsets."""
    return (value - _EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)
