"""One reachability per row (app.freshness, the dashboard's looks beside the record): "AWS unreachable"
only for looks AWS did not answer, since the first of them after its last answer, and never a row that
says reachable in its freshness while its record and flag say AWS does not answer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError, EndpointConnectionError

from hyperpod_scheduler.app.freshness import LookSeen, freshness, reads_document, unreachable_text
from hyperpod_scheduler.app.looks import Look, Looks
from hyperpod_scheduler.app.wording import when
from hyperpod_scheduler.engine.ref import ClusterRef
from hyperpod_scheduler.store.records import AwsReads
from hyperpod_scheduler.web.fleet_view import _mark

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
T1, T2 = T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)
REF = ClusterRef(key="111111111111/us-east-1/c", name="c", region="us-east-1", account="111111111111")
DENIED = ClientError(
    {"Error": {"Code": "AccessDeniedException", "Message": "no"}, "ResponseMetadata": {"HTTPStatusCode": 400}},
    "DescribeCluster",
)
TIMEOUT = EndpointConnectionError(endpoint_url="https://sagemaker.us-east-1.amazonaws.com")


def _seen(look: Look | None) -> LookSeen:
    assert look is not None
    return look.seen()


def test_unreachable_since_starts_after_the_last_look_aws_answered_even_with_an_error() -> None:
    looks = Looks()
    looks.keep(REF, DENIED, T1)  # AWS answered (no)
    looks.keep(REF, TIMEOUT, T2)  # then it did not
    reads = AwsReads(ok_at=T0, failed_at=T2, failing_since=T2, error="no answer")  # as the engine recorded it
    fresh = freshness(reads, T0, _seen(looks.look(REF)), False)
    assert fresh.reachable is False and fresh.unreachable_since == T2  # was T1: the answered look's
    assert fresh.text.startswith(f"AWS unreachable since {when(T2)}")


def test_a_failure_of_ours_after_aws_stopped_answering_keeps_the_rows_one_reachability() -> None:
    # The record says AWS has not answered since T1; a later look fails on our side (a bug met on the
    # data): that tells nothing of AWS, so the row still says unreachable, in its freshness as in its
    # record and first flag (before: freshness said reachable beside an "AWS unreachable" flag).
    reads = AwsReads(ok_at=T0, failed_at=T1, failing_since=T1, error="no answer")
    looks = Looks()
    looks.keep(REF, TIMEOUT, T1)
    looks.keep(REF, RuntimeError("met a bug \x1b[2J on its data"), T2)
    row: dict[str, Any] = {"aws": reads_document(reads), "flags": [{"kind": "stale", "text": unreachable_text(reads)}]}
    _mark(row, reads, T0, looks.look(REF), False)
    assert row["freshness"]["reachable"] is False and row["aws"]["reachable"] is False
    assert row["freshness"]["unreachable_since"] == T1.isoformat()
    text = row["freshness"]["text"]
    assert text.startswith(unreachable_text(reads)) and f"the look at {when(T2)} failed (met a bug" in text
    assert "\x1b" not in text and "\\x1b[2J" in text  # the error's escape code shown, not sent
    assert [f["kind"] for f in row["flags"]] == ["stale"]  # one flag, not a second that contradicts it


def test_an_answered_error_with_nothing_failing_on_the_record_is_reachable_and_says_the_error() -> None:
    looks = Looks()
    looks.keep(REF, DENIED, T1)
    fresh = freshness(AwsReads(ok_at=T0), T0, _seen(looks.look(REF)), False)
    assert fresh.reachable is True and fresh.failed_look is True and fresh.unreachable_since is None
    assert fresh.text == f"the look at {when(T1)} failed (An error occurred (AccessDeniedException) when calling " \
        f"the DescribeCluster operation: no); figures as of {when(T0)} from the store"  # fmt: skip


def test_a_failed_looks_flag_goes_where_status_puts_the_records_after_a_pending_approval() -> None:
    # `status` lists a pending approval first (a decision waits), then the record's stale flag; a row
    # whose look failed on the page listed its stale flag before the approval.
    approval = {"kind": "approval", "text": "release of train (4 × p5.48xlarge) awaits approval until …"}
    held = {"kind": "held", "text": "held running by ops"}
    for look in (DENIED, TIMEOUT):
        looks = Looks()
        looks.keep(REF, look, T1)
        row: dict[str, Any] = {"aws": reads_document(None), "flags": [approval, held]}
        _mark(row, None, T0, looks.look(REF), False)
        assert [f["kind"] for f in row["flags"]] == ["approval", "stale", "held"]
        assert row["flags"][1]["text"] == row["freshness"]["text"]
    row = {"aws": reads_document(None), "flags": [held]}
    _mark(row, None, T0, looks.look(REF), False)
    assert [f["kind"] for f in row["flags"]] == ["stale", "held"]
