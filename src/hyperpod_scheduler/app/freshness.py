"""Whether a cluster's figures are live: how the engine's last DescribeCluster reads went (the record's
``reads``, written by ``engine.reads``), in the words and the JSON every face shows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hyperpod_scheduler.app.wording import when
from hyperpod_scheduler.store.records import AwsReads


def reads_document(reads: AwsReads | None) -> dict[str, Any]:
    """``aws`` in the JSON: whether the last read answered, and the instants (None: never read)."""

    def iso(at: datetime | None) -> str | None:
        return None if at is None else at.isoformat()

    if reads is None:
        return {
            "reachable": None,
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


__all__ = ["reads_document", "unreachable_text"]
