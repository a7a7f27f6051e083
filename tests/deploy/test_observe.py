"""Log lines and EMF counts as plain data."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hyperpod_scheduler.deploy.observe import Place, TickCounts, count, emf, log_line
from hyperpod_scheduler.engine.events import Event
from hyperpod_scheduler.engine.runner import Result
from hyperpod_scheduler.store.records import ClusterRecord, GroupSize, Snapshot

T = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
HERE = Place("111111111111", "eu-west-1")


def ev(kind: str, **detail: object) -> Event:
    return Event(T, "c", kind, "m", dict(detail))  # type: ignore[arg-type]


def stopped(count_: int, state: str = "stopped") -> ClusterRecord:
    snap = Snapshot(taken_at=T, sizes={"w": GroupSize(count=count_)}, transition_id="t")
    return ClusterRecord.new("k", T).evolve(snapshot=snap, applied_state=state)


@pytest.mark.parametrize(
    ("events", "results", "records", "expected"),
    [
        ([], [], [], TickCounts(0, 0, 0, 0)),
        ([ev("sent"), ev("sent"), ev("note")], [], [], TickCounts(2, 0, 0, 0)),
        (
            [],
            [Result("a", "error", "x"), Result("b", "failed", "y"), Result("c", "skip", "")],
            [],
            TickCounts(0, 2, 0, 0),
        ),
        ([ev("settled", outcomes={"w": "partial 12/16", "c": "restored 1/1"})], [], [], TickCounts(0, 0, 1, 0)),
        ([ev("settled", outcomes={"w": "restored 16/16"})], [], [], TickCounts(0, 0, 0, 0)),
        ([], [], [stopped(16), stopped(4, "running"), None], TickCounts(0, 0, 0, 16)),
    ],
)
def test_counts(
    events: list[Event], results: list[Result], records: list[ClusterRecord | None], expected: TickCounts
) -> None:
    assert count(events, results, records) == expected


def test_a_failure_logs_at_error_level_with_where_it_happened() -> None:
    line = log_line(HERE, ev("error"))
    assert (line["level"], line["account"], line["region"], line["cluster"], line["outcome"]) == (
        "ERROR", "111111111111", "eu-west-1", "c", "error"
    )  # fmt: skip


def test_emf_values_sit_beside_their_declaration() -> None:
    doc = emf(HERE, TickCounts(1, 2, 3, 4, 5, 6), T)
    declared = [m["Name"] for m in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    assert [doc[name] for name in declared] == [1, 2, 3, 4, 5, 6]
    assert doc["_aws"]["Timestamp"] == int(T.timestamp() * 1000)


def test_metrics_carry_no_account_dimension_unless_asked() -> None:
    """Each dimension set is billed as its own custom metrics: per account that is one set per target."""
    plain = emf(HERE, TickCounts(1, 0, 0, 0), T)["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
    assert plain == [[], ["Region"]]  # fleet-wide (the alarms watch it) and per region
    assert not any("Account" in d for d in plain)
    asked = emf(HERE, TickCounts(1, 0, 0, 0), T, per_account=True)["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
    assert ["Account", "Region"] in asked
    # Every dimension named is a member of the document, or CloudWatch drops the metric.
    doc = emf(HERE, TickCounts(1, 0, 0, 0), T, per_account=True)
    assert all(name in doc for d in asked for name in d)


def test_deferred_and_throttles_are_counted() -> None:
    results = [Result("a", "deferred", ""), Result("b", "error", "x"), Result("c", "sent", "")]
    assert count([], results, [], throttles=3) == TickCounts(0, 1, 0, 0, deferred=1, throttles=3)
