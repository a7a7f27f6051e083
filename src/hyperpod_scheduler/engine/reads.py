"""How this engine's DescribeCluster reads went, kept on the cluster's record after each turn (issue 27
item 8): a face that shows the record must say "AWS unreachable since 14:02 UTC; sizes as of 13:47"
rather than present stale sizes as live.

The reads are noted in memory as they happen (``Reads.ok`` / ``Reads.failed``) and written once, after
the turn (``keep``): a write in the middle of a turn would move the record's version under the engine's
own compare-and-set. A failure is a read AWS did not answer (no connection, a timeout, throttling, a
5xx); an answer such as ResourceNotFound is AWS answering, not a failed read.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.aws.deadlines import DeadlineExceeded
from hyperpod_scheduler.store.records import AwsReads, ClusterRecord

if TYPE_CHECKING:
    from hyperpod_scheduler.engine.ref import ClusterRef
    from hyperpod_scheduler.store.base import StateStore

# A good read is written when reads were failing, and otherwise at most this often (a good read alone
# changes nothing a face shows; a record write per read of a polling --wait would be a write a second).
OK_EVERY = timedelta(minutes=10)
_UNANSWERED = ("Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException")


def unanswered(exc: BaseException) -> bool:
    """Whether ``exc`` means AWS did not answer the read (rather than answered no)."""
    if isinstance(exc, BotoCoreError | DeadlineExceeded):
        return True
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        code = exc.response.get("Error", {}).get("Code", "")
        return int(status) >= 500 or code in _UNANSWERED
    return False


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        text = f"{err.get('Code', 'Error')}: {err.get('Message', '')}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:300]


@dataclass
class Seen:
    ok_at: datetime | None = None
    failed_at: datetime | None = None
    error: str | None = None


class Reads:
    """The reads of this engine since each cluster's last turn, by (region, profile, name): the key a
    describe is made with may not carry the account yet."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str | None, str | None, str], Seen] = {}
        self._lock = threading.Lock()  # turns run in threads

    @staticmethod
    def _id(ref: ClusterRef) -> tuple[str | None, str | None, str]:
        return (ref.region, ref.profile, ref.name)

    def ok(self, ref: ClusterRef, now: datetime) -> None:
        with self._lock:
            self._seen.setdefault(self._id(ref), Seen()).ok_at = now

    def failed(self, ref: ClusterRef, now: datetime, exc: BaseException) -> None:
        with self._lock:
            seen = self._seen.setdefault(self._id(ref), Seen())
            seen.failed_at, seen.error = now, _one_line(exc)

    def take(self, ref: ClusterRef) -> Seen | None:
        with self._lock:
            return self._seen.pop(self._id(ref), None)


def merged(old: AwsReads | None, seen: Seen, updated_at: datetime) -> AwsReads | None:
    """The record's reads after a turn that saw ``seen``; None when nothing worth a write changed."""
    before = old or AwsReads()
    failed_last = seen.failed_at is not None and (seen.ok_at is None or seen.failed_at >= seen.ok_at)
    if failed_last:
        assert seen.failed_at is not None
        return before.evolve(
            failed_at=seen.failed_at,
            error=seen.error,
            failing_since=before.failing_since or seen.failed_at,
            ok_at=seen.ok_at or before.ok_at,
            recorded_before=before.recorded_before or (None if (seen.ok_at or before.ok_at) else updated_at),
        )
    if seen.ok_at is None:
        return None
    stale = before.ok_at is None or seen.ok_at - before.ok_at >= OK_EVERY
    if not before.failing and not stale:
        return None
    return before.evolve(ok_at=seen.ok_at, failing_since=None, recorded_before=None)


def keep(store: StateStore, key: str, seen: Seen | None) -> None:
    """Write ``seen`` onto the record under ``key`` (an existing record only: a cluster never recorded
    has no sizes to call stale)."""
    if seen is None:
        return
    from hyperpod_scheduler.store.base import update

    def fn(current: ClusterRecord | None) -> ClusterRecord | None:
        if current is None:
            return None
        reads = merged(current.reads, seen, current.updated_at)
        return None if reads is None else current.evolve(reads=reads)

    update(store, key, fn)


__all__ = ["OK_EVERY", "Reads", "Seen", "keep", "merged", "unanswered"]
