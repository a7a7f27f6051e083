"""Errors the state store raises. All are ``HyperpodSchedulerError`` so the CLI prints one line."""

from __future__ import annotations

from hyperpod_scheduler.errors import HyperpodSchedulerError


class StoreError(HyperpodSchedulerError):
    """The store cannot be opened or used (bad path, unreadable file, newer schema)."""


class NotAStoreFile(StoreError):
    """``--state`` names something that is not a regular file (a FIFO, a device, a folder): bad input."""

    exit_code = 2


class ConflictError(StoreError):
    """A compare-and-set lost: someone else wrote the record since it was read.

    Callers re-read and decide again (``update`` does this); never retry a stale write blindly.
    """

    def __init__(self, key: str, expected: int | None, actual: int | None) -> None:
        self.key = key
        self.expected = expected
        self.actual = actual
        want = "absent" if not expected else f"version {expected}"
        have = "absent" if actual is None else f"version {actual}"
        super().__init__(f"state store: record '{key}' changed concurrently (expected {want}, found {have})")


class CorruptRecordError(StoreError):
    """A stored row cannot be decoded; names the key so the user can inspect or delete it."""

    def __init__(self, key: str, what: str, reason: str) -> None:
        self.key = key
        super().__init__(f"state store: {what} for '{key}' is unreadable: {reason}")
