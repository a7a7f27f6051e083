"""Savings maths from the action history: nights, avoided hours, FSx residual, protected groups, shortfalls."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.cost.fsx import FileSystem
from hyperpod_scheduler.cost.prices import Price, PriceTable, bundled
from hyperpod_scheduler.cost.savings import build_report, keep_cost_per_night, parse_outcome
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store.records import ClusterRecord, GroupSize, HistoryEntry, Snapshot

KEY = "default/us-east-1/train"
D0 = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday
PRICES = PriceTable(
    {"ml.p5.48xlarge": Price(100.0, "t"), "ml.m5.xlarge": Price(0.25, "t")},
    {"PERSISTENT_2/250": Price(0.2, "t")},
    ("t",),
)
FS = FileSystem("fs-0123456789abcdef0", 7300, "PERSISTENT_2", 250)  # 7300 GiB * 0.2 / 730 = $2/hour
SIZES = {"gpu": {"count": 4, "instance_type": "ml.p5.48xlarge"}, "ctl": {"count": 1, "instance_type": "ml.m5.xlarge"}}


def at(day: int, hour: float) -> datetime:
    return D0 + timedelta(days=day, hours=hour)


def stop(when: datetime, outcomes: dict[str, str] | None = None, sizes: Any = SIZES, **kw: Any) -> HistoryEntry:
    detail: dict[str, Any] = {"outcomes": outcomes or {"gpu": "stopped 0/0", "ctl": "stopped 0/0"}}
    if sizes is not None:
        detail["sizes"] = sizes
    return HistoryEntry(
        key=kw.get("key", KEY),
        at=when,
        action="stop",
        actor="t",
        outcome=kw.get("outcome", "ok"),
        duration_s=600,
        detail=detail,
    )


def start(when: datetime, duration_h: float = 0.5, outcomes: dict[str, str] | None = None, **kw: Any) -> HistoryEntry:
    return HistoryEntry(
        key=kw.get("key", KEY),
        at=when,
        action="start",
        actor="t",
        outcome=kw.get("outcome", "ok"),
        duration_s=duration_h * 3600,
        detail={"outcomes": outcomes or {"gpu": "restored 4/4", "ctl": "restored 1/1"}},
    )


def report(entries: list[HistoryEntry], since: datetime = D0, until: datetime = at(7, 0), **kw: Any) -> Any:
    return build_report(entries, kw.get("records", {}), kw.get("fsx", {KEY: [FS]}), PRICES, since, until)


def test_one_night_saves_the_stopped_nodes_and_fsx_keeps_billing() -> None:
    # Stop settles 20:00, start sent 07:30 (settled 08:00 after 30 min): 11.5 hours stopped.
    r = report([stop(at(0, 20)), start(at(1, 8))])
    (c,) = r.clusters
    t = c.totals
    assert (t.nights, t.stopped_hours) == (1, pytest.approx(11.5))
    assert t.avoided_node_hours == pytest.approx(5 * 11.5)
    assert t.avoided_cost == pytest.approx((4 * 100 + 0.25) * 11.5)
    assert t.fsx_residual == pytest.approx(2.0 * 11.5)
    assert t.protected_cost == 0
    assert t.net_saving == pytest.approx(t.avoided_cost - t.fsx_residual)
    assert r.per_night(t)["avoided_cost"] == pytest.approx(t.avoided_cost)


def test_kept_group_is_a_protected_cost_not_a_saving() -> None:
    r = report([stop(at(0, 20), {"gpu": "kept 4/4", "ctl": "stopped 0/0"}), start(at(1, 8))])
    t = r.clusters[0].totals
    assert t.avoided_cost == pytest.approx(0.25 * 11.5)
    assert t.protected_cost == pytest.approx(400 * 11.5)
    assert t.protected_node_hours == pytest.approx(4 * 11.5)
    # Kept on purpose: reported beside the saving, never counted as a loss against it.
    assert t.net_saving == pytest.approx(t.avoided_cost - t.fsx_residual)


def test_floor_keeps_some_nodes_running() -> None:
    t = report([stop(at(0, 20), {"gpu": "stopped 1/1", "ctl": "stopped 0/0"}), start(at(1, 8))]).clusters[0].totals
    assert t.avoided_node_hours == pytest.approx(4 * 11.5)  # 3 gpu + 1 ctl
    assert t.protected_cost == pytest.approx(100 * 11.5)


def test_sizes_fall_back_to_the_records_snapshot() -> None:
    snap = Snapshot(
        taken_at=at(0, 20), transition_id="x", sizes={"gpu": GroupSize(count=2, instance_type="ml.p5.48xlarge")}
    )
    record = ClusterRecord(key=KEY, updated_at=at(1, 8), snapshot=snap)
    r = report([stop(at(0, 20), {"gpu": "stopped 0/0"}, sizes=None), start(at(1, 8))], records={KEY: record})
    (night,) = r.clusters[0].nights
    assert night.sizes_from == "snapshot"
    assert r.clusters[0].totals.avoided_cost == pytest.approx(200 * 11.5)


def test_unknown_instance_type_counts_hours_but_no_dollars_and_is_named() -> None:
    sizes = {"gpu": {"count": 2, "instance_type": "ml.p6-b200.48xlarge"}}
    c = report([stop(at(0, 20), {"gpu": "stopped 0/0"}, sizes=sizes), start(at(1, 8))]).clusters[0]
    assert c.totals.avoided_node_hours == pytest.approx(23)
    assert c.totals.avoided_cost == 0
    assert c.unpriced == {"ml.p6-b200.48xlarge"}


def test_nights_are_clipped_to_the_window_and_an_open_night_runs_to_until() -> None:
    # Friday 20:00 stop, never started again; the window ends Sunday 00:00.
    r = report([stop(at(4, 20))], since=at(4, 22), until=at(6, 0))
    (night,) = r.clusters[0].nights
    assert night.ongoing and night.hours == pytest.approx(26)


def test_a_night_that_began_before_since_counts_from_since() -> None:
    r = report([stop(at(0, 20)), start(at(1, 8))], since=at(1, 0), until=at(2, 0))
    assert r.clusters[0].totals.stopped_hours == pytest.approx(7.5)


def test_noop_and_refused_entries_change_nothing() -> None:
    noise = [
        HistoryEntry(key=KEY, at=at(0, 21), action="stop", actor="t", outcome="noop"),
        HistoryEntry(key=KEY, at=at(0, 22), action="start", actor="t", outcome="refused"),
        HistoryEntry(key=KEY, at=at(0, 23), action="hold", actor="t", outcome="ok"),
    ]
    assert report([stop(at(0, 20)), *noise, start(at(1, 8))]).clusters[0].totals.stopped_hours == pytest.approx(11.5)


def test_second_stop_without_a_start_closes_the_first_night() -> None:
    r = report([stop(at(0, 20), outcome="failed"), stop(at(0, 22)), start(at(1, 8))])
    assert [round(n.hours, 1) for n in r.clusters[0].nights] == [2.0, 9.5]


def test_shortfalls_at_start_are_listed_with_missing_nodes() -> None:
    r = report([stop(at(0, 20)), start(at(1, 8), outcomes={"gpu": "partial 2/4", "ctl": "restored 1/1"})])
    c = r.clusters[0]
    (s,) = c.shortfalls
    assert (s.group, s.outcome, s.current, s.target) == ("gpu", "partial", 2, 4)
    assert c.totals.shortfall_nodes == 2 and r.total.shortfall_nodes == 2


def test_totals_add_clusters_and_per_month_projects_the_window() -> None:
    other = "default/us-east-1/other"
    entries = [stop(at(0, 20)), start(at(1, 8)), stop(at(0, 20), key=other), start(at(1, 8), key=other)]
    r = report(entries, fsx={KEY: [FS]})
    assert [c.key for c in r.clusters] == [other, KEY]
    assert r.total.avoided_cost == pytest.approx(2 * (400.25 * 11.5))
    assert r.total.fsx_residual == pytest.approx(23)  # only one cluster has FSx
    assert r.per_month(r.total)["avoided_cost"] == pytest.approx(r.total.avoided_cost * 730 / (7 * 24))


def test_a_cluster_with_fsx_but_no_nights_shows_up_with_zero_savings() -> None:
    r = report([], fsx={KEY: [FS]})
    assert [c.key for c in r.clusters] == [KEY] and r.total.nights == 0
    assert r.clusters[0].fsx_hourly == pytest.approx(2.0)


def test_window_must_have_positive_length() -> None:
    with pytest.raises(UsageError, match=r"--until .* must be after --since"):
        report([], since=at(1, 0), until=at(1, 0))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("restored 4/4", ("restored", 4, 4)), ("partial 2/4", ("partial", 2, 4)), ("kept", None), (None, None)],
)
def test_parse_outcome(text: Any, expected: Any) -> None:
    assert parse_outcome(text) == expected


def test_keep_cost_per_night() -> None:
    assert keep_cost_per_night("ml.p5.48xlarge", 2, 12, bundled()) == pytest.approx(2 * 12 * 98.32)
    assert keep_cost_per_night("ml.unknown.xlarge", 2, 12, bundled()) is None
    with pytest.raises(UsageError, match="count -1"):
        keep_cost_per_night("ml.p5.48xlarge", -1, 12, bundled())


_gaps = st.lists(st.tuples(st.floats(0.1, 30), st.floats(0.1, 30), st.floats(0, 2)), min_size=0, max_size=12)


@settings(max_examples=60, deadline=None)
@given(_gaps, st.floats(0, 200), st.floats(1, 400))
def test_nights_never_overlap_or_leave_the_window(
    gaps: list[tuple[float, float, float]], lo: float, span: float
) -> None:
    """Any alternation of stops and starts: stopped hours fit in the window and the money adds up."""
    entries, clock = [], D0
    for running_h, stopped_h, start_h in gaps:
        clock += timedelta(hours=running_h)
        entries.append(stop(clock))
        clock += timedelta(hours=stopped_h)
        entries.append(start(clock, duration_h=min(start_h, stopped_h)))
    since, until = D0 + timedelta(hours=lo), D0 + timedelta(hours=lo + span)
    r = report(entries, since=since, until=until)
    t = r.total
    assert 0 <= t.stopped_hours <= span + 1e-6
    assert t.avoided_node_hours == pytest.approx(5 * t.stopped_hours)
    assert t.fsx_residual == pytest.approx(2.0 * t.stopped_hours)
    assert t.net_saving == pytest.approx(t.avoided_cost - t.fsx_residual)
    nights = [n for c in r.clusters for n in c.nights]
    for a, b in itertools.pairwise(nights):
        assert a.end <= b.start
    assert all(since <= n.start < n.end <= until for n in nights)


@given(
    st.sampled_from(["restored", "partial", "failed", "stopped", "kept"]), st.integers(0, 10**6), st.integers(0, 10**6)
)
def test_parse_outcome_reads_what_the_engine_writes(kind: str, current: int, target: int) -> None:
    assert parse_outcome(f"{kind} {current}/{target}") == (kind, current, target)
