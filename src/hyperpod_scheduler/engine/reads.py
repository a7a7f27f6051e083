"""How this engine's DescribeCluster reads went, kept on the cluster's record after each turn (issue 27
item 8): a face that shows the record must say "AWS unreachable since 14:02 UTC; sizes as of 13:47"
rather than present stale sizes as live.

The reads are noted in memory as they happen (``Reads.ok`` / ``Reads.failed``) and written once, after
the turn (``keep``): a write in the middle of a turn would move the record's version under the engine's
own compare-and-set. A failure is a read AWS did not answer (no connection, a timeout, throttling, a
5xx); an answer such as ResourceNotFound is AWS answering, not a failed read: it ends a failure, and
leaves "sizes as of" where it was (``Reads.answered``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from botocore import exceptions as botocore_errors
from botocore.exceptions import ClientError

from hyperpod_scheduler.aws.deadlines import DeadlineExceeded
from hyperpod_scheduler.store.records import AwsReads, ClusterRecord

if TYPE_CHECKING:
    from hyperpod_scheduler.engine.ref import ClusterRef
    from hyperpod_scheduler.store.base import StateStore

# A good read alone is never written: it changes nothing a face shows, and a write (a durable commit)
# per turn that reads would double what a stop or a start costs the store. Only a change of
# reachability is written: the first failed read, each failure after it, and the read that ends them.
_UNANSWERED = ("Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException")


# What botocore raises when a request went out and no whole answer came back: no connection, a timeout,
# a connection closed or a body cut short, or the retry quota spent on such failures. Not the rest of
# BotoCoreError: no credentials, an SSO token expired, a profile or region not found, a parameter
# refused: nothing was asked of AWS, and "AWS unreachable" would send a team to the network instead.
_NO_ANSWER = (
    botocore_errors.HTTPClientError,
    botocore_errors.ConnectionError,
    botocore_errors.IncompleteReadError,
    botocore_errors.CapacityNotAvailableError,
    DeadlineExceeded,
)


def unanswered(exc: BaseException) -> bool:
    """Whether ``exc`` means AWS did not answer the read (rather than answered no, or was never asked)."""
    if isinstance(exc, _NO_ANSWER):
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
    # The record's reads as the turn read them (``Reads.note``): with it, ``keep`` knows without a
    # store read of its own that a good read changes nothing.
    before: AwsReads | None = None
    noted: bool = False
    # The last read AWS answered with an error (ResourceNotFound, AccessDenied): AWS is reachable, so
    # a failure ends, but no sizes were read, so "sizes as of" does not move.
    answered_at: datetime | None = None


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

    def answered(self, ref: ClusterRef, now: datetime) -> None:
        with self._lock:
            self._seen.setdefault(self._id(ref), Seen()).answered_at = now

    def note(self, ref: ClusterRef, record: ClusterRecord | None) -> None:
        """The record as the turn read it: its reads are what ``keep`` merges onto, unless it must write."""
        with self._lock:
            seen = self._seen.setdefault(self._id(ref), Seen())
            seen.before, seen.noted = (record.reads if record is not None else None), True

    def take(self, ref: ClusterRef) -> Seen | None:
        with self._lock:
            return self._seen.pop(self._id(ref), None)


def merged(old: AwsReads | None, seen: Seen, updated_at: datetime) -> AwsReads | None:
    """The record's reads after a turn that saw ``seen``; None when nothing worth a write changed."""
    before = old or AwsReads()
    heard = max((t for t in (seen.ok_at, seen.answered_at) if t is not None), default=None)
    failed_last = seen.failed_at is not None and (heard is None or seen.failed_at >= heard)
    if failed_last:
        assert seen.failed_at is not None
        return before.evolve(
            failed_at=seen.failed_at,
            error=seen.error,
            failing_since=before.failing_since or seen.failed_at,
            ok_at=seen.ok_at or before.ok_at,
            # The record as last written: what it holds is as of then, or of the good read after it.
            recorded_before=before.recorded_before or updated_at,
        )
    if seen.ok_at is None and seen.answered_at is None:
        return None
    if not before.failing:
        return None  # reachable, and it was: nothing a face shows changes
    if seen.ok_at is None:  # AWS answered with an error: reachable again, nothing read
        return before.evolve(failing_since=None)
    return before.evolve(ok_at=seen.ok_at, failing_since=None, recorded_before=None)


def keep(store: StateStore, key: str, seen: Seen | None) -> None:
    """Write ``seen`` onto the record under ``key`` (an existing record only: a cluster never recorded
    has no sizes to call stale)."""
    if seen is None:
        return
    if seen.noted and merged(seen.before, seen, seen.failed_at or datetime.min) is None:
        return  # the turn's own read of the record shows nothing to write: no read of its own
    from hyperpod_scheduler.store.base import update

    def fn(current: ClusterRecord | None) -> ClusterRecord | None:
        if current is None:
            return None
        reads = merged(current.reads, seen, current.updated_at)
        return None if reads is None else current.evolve(reads=reads)

    update(store, key, fn)


__all__ = ["Reads", "Seen", "keep", "merged", "unanswered"]
