"""Whether a cluster's figures are live: how the engine's last DescribeCluster reads went (the record's
``reads``, written by ``engine.reads``), in the words and the JSON every face shows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hyperpod_scheduler.app.wording import when
from hyperpod_scheduler.inputs.text import clean
from hyperpod_scheduler.store.records import AwsReads


def reads_document(reads: AwsReads | None) -> dict[str, Any]:
    """``aws`` in the JSON: whether the last read answered, and the instants. No reads on the record:
    no read has failed since reads were recorded (the engine writes only a change of reachability,
    never a good read alone), so AWS answers as far as the record knows."""

    def iso(at: datetime | None) -> str | None:
        return None if at is None else at.isoformat()

    if reads is None:
        return {
            "reachable": True,
            "failing_since": None,
            "last_failed": None,
            "last_ok": None,
            "sizes_as_of": None,
            "error": None,
            "text": None,
        }
    return {
        "reachable": not reads.failing,
        "failing_since": iso(reads.failing_since),
        "last_failed": iso(reads.failed_at),
        "last_ok": iso(reads.ok_at),
        "sizes_as_of": iso(reads.sizes_as_of),
        "error": reads.error if reads.failing else None,
        "text": unreachable_text(reads) if reads.failing else None,
    }


def unreachable_text(reads: AwsReads) -> str:
    """``AWS unreachable since Wed 2 Dec 14:02 UTC; sizes as of Wed 2 Dec 13:47 UTC``."""
    assert reads.failing_since is not None
    known = reads.sizes_as_of
    sizes = f"; sizes as of {when(known)}" if known is not None else "; no sizes read from AWS yet"
    return f"AWS unreachable since {when(reads.failing_since)}{sizes}"


# ---- the dashboard's own looks beside the record (the Fleet page at scale) --------------------------


@dataclass(frozen=True)
class Freshness:
    """Whether a cluster's row is fresh from AWS or from the store, and since when: the record's reads
    (the engine's) and the dashboard's last look at it (``app.looks``) as one value, so the marking, the
    flag and ``/api/fleet`` cannot disagree. ``source``: "aws" (a look answered), "store" (the record's
    figures: not looked at yet, or the look failed)."""

    source: str  # "aws" or "store"
    as_of: datetime | None  # when what the row shows was last known from AWS (None: never)
    looked_at: datetime | None  # the dashboard's (or a tick's) last look, answered or not
    reachable: bool
    unreachable_since: datetime | None
    refreshing: bool  # a refresh is reading the fleet now: the row will be read again
    text: str
    reads: AwsReads | None  # the record's reads with the look's outcome on them (``reads_document``)
    # The last look failed, though not for want of an answer (AWS answered with an error, or it failed on
    # our side): nothing on the row is live, and ``text`` says which error; ``reachable`` stays True.
    failed_look: bool = False

    def document(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "fresh": self.source == "aws",
            "as_of": None if self.as_of is None else self.as_of.isoformat(),
            "looked_at": None if self.looked_at is None else self.looked_at.isoformat(),
            "reachable": self.reachable,
            "unreachable_since": None if self.unreachable_since is None else self.unreachable_since.isoformat(),
            "refreshing": self.refreshing,
            "text": self.text,
        }


@dataclass(frozen=True)
class LookSeen:
    """What a face's last look at a cluster found (``app.looks.Look``, as ``freshness`` reads it)."""

    at: datetime
    ok_at: datetime | None  # the last look that answered
    failing_since: datetime | None  # since when looks fail (None: this one answered)
    error: str | None  # one line; None: it answered
    unanswered: bool = False  # it failed because AWS did not answer (``engine.reads.unanswered``)


def freshness(
    reads: AwsReads | None, recorded_at: datetime | None, look: LookSeen | None, refreshing: bool
) -> Freshness:
    """One cluster's freshness. ``look``: the last look, or None: not looked at since the dashboard
    started. Only a look AWS did not answer makes it "AWS unreachable"; one AWS answered with an error
    (AccessDenied, a cluster deleted) or that failed on our side says that error instead."""
    soon = "; refreshing now" if refreshing else ""
    if look is not None:
        at, ok_at, failing_since, error = look.at, look.ok_at, look.failing_since, look.error
        said = clean(" ".join(error.split())[:300], one_line=True) if error is not None else ""
        # The engine's own read after this look failed for want of an answer: that is the later word.
        failed_after = reads is not None and reads.failing and reads.failed_at is not None and reads.failed_at > at
        if error is None and not failed_after:
            return Freshness("aws", at, at, True, None, refreshing, f"read from AWS at {when(at)}", reads)
        if error is not None and not look.unanswered and not failed_after:
            if reads is not None and reads.failing:
                # The record says AWS has not answered since then, and this look tells nothing of AWS
                # (it failed on our side, or its answer is not on the record yet): that stands, one
                # reachability for the row and every face, with this look's error beside it.
                text = f"{unreachable_text(reads)}; the look at {when(at)} failed ({said}){soon}"
                return Freshness("store", reads.sizes_as_of, at, False, reads.failing_since, refreshing, text, reads)
            stored = max((t for t in (ok_at, reads.sizes_as_of if reads is not None else None) if t), default=None)
            stored = stored or recorded_at
            figures = f"figures as of {when(stored)} from the store" if stored else "no figures read from AWS yet"
            text = f"the look at {when(at)} failed ({said}); {figures}{soon}"
            return Freshness("store", stored, at, True, None, refreshing, text, reads, failed_look=True)
        if error is not None:
            # The engine's reads and the dashboard's looks are one history: failing since the earlier
            # failure that no answer came after.
            since = failing_since or at
            earlier = reads.failing_since if reads is not None and reads.failing else None
            if earlier is not None and earlier < since and (ok_at is None or ok_at < earlier):
                since = earlier
            known = [t for t in (ok_at, reads.sizes_as_of if reads is not None else None) if t is not None]
            merged = AwsReads(
                ok_at=max(known) if known else None,
                failed_at=at,
                failing_since=since,
                error=said or "no answer",
                recorded_before=recorded_at if not known else None,
            )
            return Freshness(
                "store", merged.sizes_as_of, at, False, since, refreshing, unreachable_text(merged) + soon, merged
            )
    if reads is not None and reads.failing:
        return Freshness(
            "store", reads.sizes_as_of, reads.failed_at, False, reads.failing_since, refreshing,
            unreachable_text(reads) + soon, reads,
        )  # fmt: skip
    stored = (reads.sizes_as_of if reads is not None else None) or recorded_at
    if stored is None:
        return Freshness("store", None, None, True, None, refreshing, "not looked at yet" + soon, reads)
    return Freshness("store", stored, None, True, None, refreshing, f"as of {when(stored)} from the store{soon}", reads)


__all__ = ["Freshness", "LookSeen", "freshness", "reads_document", "unreachable_text"]
