"""Savings maths from the action history: nights, the saving, FSx still billing, kept groups, shortfalls."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.cost.fsx import FileSystem
from hyperpod_scheduler.cost.prices import Price, PriceTable, bundled
from hyperpod_scheduler.cost.rates import money
from hyperpod_scheduler.cost.savings import PERIODS, Figures, Report, build_report, keep_cost_per_night, nightly
from hyperpod_scheduler.cost.summary import as_document, csv_rows
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.records import ClusterRecord, GroupSize, HistoryEntry, Snapshot

KEY = "default/us-east-1/train"
OTHER = "default/us-east-1/other"
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


def typed(text: str) -> dict[str, Any]:
    """``"kept 4/4"`` in the shape the engine writes now."""
    kind, counts = text.split()
    current, target = counts.split("/")
    return {"outcome": kind, "current": int(current), "target": int(target)}


def stop(
    when: datetime, outcomes: dict[str, str] | None = None, sizes: Any = SIZES, *, legacy: bool = False, **kw: Any
) -> HistoryEntry:
    texts = outcomes or {"gpu": "stopped 0/0", "ctl": "stopped 0/0"}
    detail: dict[str, Any] = {"outcomes": texts if legacy else {g: typed(t) for g, t in texts.items()}}
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


def start(
    when: datetime, duration_h: float = 0.5, outcomes: dict[str, str] | None = None, *, legacy: bool = False, **kw: Any
) -> HistoryEntry:
    texts = outcomes or {"gpu": "restored 4/4", "ctl": "restored 1/1"}
    return HistoryEntry(
        key=kw.get("key", KEY),
        at=when,
        action="start",
        actor="t",
        outcome=kw.get("outcome", "ok"),
        duration_s=duration_h * 3600,
        detail={"outcomes": texts if legacy else {g: typed(t) for g, t in texts.items()}},
    )


def report(entries: list[HistoryEntry], since: datetime = D0, until: datetime = at(7, 0), **kw: Any) -> Report:
    return build_report(entries, kw.get("records", {}), kw.get("fsx", {KEY: [FS]}), PRICES, since, until)


# One night: stop settles Monday 20:00, the start is sent 07:30 (it settles at 08:00): 11.5 hours stopped.
H = 11.5


@pytest.mark.parametrize("legacy", [False, True], ids=["typed outcomes", "old string outcomes"])
@pytest.mark.parametrize(
    ("outcomes", "avoided_nodes", "saving_per_h", "kept_nodes", "kept_per_h"),
    [
        ({"gpu": "stopped 0/0", "ctl": "stopped 0/0"}, 5, 400.25, 0, 0.0),  # everything released
        ({"gpu": "kept 4/4", "ctl": "stopped 0/0"}, 1, 0.25, 4, 400.0),  # scarce P5 kept
        ({"gpu": "kept 4/4", "ctl": "kept 1/1"}, 0, 0.0, 5, 400.25),  # the head kept with its workers
        ({"gpu": "stopped 1/1", "ctl": "stopped 0/0"}, 4, 300.25, 1, 100.0),  # a floor of 1
        ({"gpu": "failed 2/0", "ctl": "stopped 0/0"}, 3, 200.25, 2, 200.0),  # a scale-in that failed half-way
        ({"ctl": "stopped 0/0"}, 5, 400.25, 0, 0.0),  # a group with no outcome counts as fully stopped
    ],
)
def test_one_night_saving_fsx_and_kept(
    legacy: bool, outcomes: dict[str, str], avoided_nodes: int, saving_per_h: float, kept_nodes: int, kept_per_h: float
) -> None:
    r = report([stop(at(0, 20), outcomes, legacy=legacy), start(at(1, 8), legacy=legacy)])
    (c,) = r.clusters
    w = c.periods.window
    assert (c.night_count, w.stopped_hours) == (1, pytest.approx(H))
    assert w.avoided_node_hours == pytest.approx(avoided_nodes * H)
    assert w.saving == pytest.approx(saving_per_h * H)  # the instance cost avoided, nothing subtracted
    assert w.fsx_while_stopped == pytest.approx(2.0 * H)  # quoted beside the saving
    assert w.kept_node_hours == pytest.approx(kept_nodes * H)
    assert w.kept_cost == pytest.approx(kept_per_h * H)  # beside it too: a saving not taken
    assert c.periods.per_night == w  # one night: a typical night is that night
    assert c.released_anything is (avoided_nodes > 0)


def test_fsx_never_turns_a_saving_into_a_loss() -> None:
    # A big file system beside a small saving (the demo's p5-training read as a loss before).
    big = FileSystem("fs-0123456789abcdef1", 730_000, "PERSISTENT_2", 250)  # $200 an hour
    r = report([stop(at(0, 20), {"gpu": "kept 4/4", "ctl": "stopped 0/0"}), start(at(1, 8))], fsx={KEY: [big]})
    w = r.clusters[0].periods.window
    assert w.saving == pytest.approx(0.25 * H) and w.saving > 0
    assert w.fsx_while_stopped == pytest.approx(200 * H)
    assert w.fsx_while_stopped > w.saving
    assert r.total.window.saving == w.saving


@pytest.mark.parametrize(
    ("fsx", "hourly"),
    [
        ([FS], 2.0),
        ([FS, FileSystem("fs-0123456789abcdef1", 1200, "SCRATCH_2", None)], 2.0),  # no SCRATCH_2 price: unpriced
        ([FileSystem("fs-0123456789abcdef1", 3650, "PERSISTENT_2", 250)], 1.0),
        ([], 0.0),
    ],
)
def test_fsx_while_stopped_is_its_hourly_cost_times_the_stopped_hours(fsx: list[FileSystem], hourly: float) -> None:
    r = report([stop(at(0, 20)), start(at(1, 8))], fsx={KEY: fsx})
    c = r.clusters[0]
    assert c.fsx_hourly == pytest.approx(hourly)
    assert c.periods.window.fsx_while_stopped == pytest.approx(hourly * H)
    assert c.periods.per_month.fsx_while_stopped == pytest.approx(hourly * H * 730 / (7 * 24))
    assert {u.split()[0] for u in c.unpriced} == {f.id for f in fsx if f.deployment_type == "SCRATCH_2"}


def test_a_stop_that_kept_everything_is_a_night_that_saves_nothing_and_shows_what_kept_running() -> None:
    # Every group protected: the engine sends nothing and writes a noop line with what stayed up.
    noop = stop(at(0, 20), {"gpu": "kept 4/4", "ctl": "kept 1/1"}, outcome="noop")
    morning = HistoryEntry(key=KEY, at=at(1, 8), action="start", actor="t", outcome="noop")
    r = report([noop, morning])
    (c,) = r.clusters
    w = c.periods.window
    assert c.night_count == 1 and w.stopped_hours == pytest.approx(12)  # a noop start closes at its own time
    assert w.saving == 0 and w.kept_cost == pytest.approx(400.25 * 12) and not c.released_anything
    assert w.fsx_while_stopped == pytest.approx(24)


def test_a_plain_noop_stop_opens_no_night() -> None:
    plain = HistoryEntry(key=KEY, at=at(0, 20), action="stop", actor="t", outcome="noop", detail={"reason": "x"})
    assert report([plain, start(at(1, 8))], fsx={}).clusters == []


def test_sizes_fall_back_to_the_records_snapshot() -> None:
    snap = Snapshot(
        taken_at=at(0, 20), transition_id="x", sizes={"gpu": GroupSize(count=2, instance_type="ml.p5.48xlarge")}
    )
    record = ClusterRecord(key=KEY, updated_at=at(1, 8), snapshot=snap)
    r = report([stop(at(0, 20), {"gpu": "stopped 0/0"}, sizes=None), start(at(1, 8))], records={KEY: record})
    (night,) = r.clusters[0].nights
    assert night.night.sizes_from == "snapshot"
    assert r.clusters[0].periods.window.saving == pytest.approx(200 * H)


def test_unknown_instance_type_counts_hours_but_no_dollars_and_is_named() -> None:
    sizes = {"gpu": {"count": 2, "instance_type": "ml.p6-b200.48xlarge"}}
    c = report([stop(at(0, 20), {"gpu": "stopped 0/0"}, sizes=sizes), start(at(1, 8))]).clusters[0]
    assert c.periods.window.avoided_node_hours == pytest.approx(23)
    assert c.periods.window.saving == 0
    assert c.unpriced == {"ml.p6-b200.48xlarge"}


def test_nights_are_clipped_to_the_window_and_an_open_night_runs_to_until() -> None:
    r = report([stop(at(4, 20))], since=at(4, 22), until=at(6, 0))
    (night,) = r.clusters[0].nights
    assert night.night.ongoing and night.night.hours == pytest.approx(26)


def test_a_night_that_began_before_since_counts_from_since() -> None:
    r = report([stop(at(0, 20)), start(at(1, 8))], since=at(1, 0), until=at(2, 0))
    assert r.clusters[0].periods.window.stopped_hours == pytest.approx(7.5)


def test_noop_and_refused_entries_change_nothing() -> None:
    noise = [
        HistoryEntry(key=KEY, at=at(0, 21), action="stop", actor="t", outcome="noop"),
        HistoryEntry(key=KEY, at=at(0, 22), action="start", actor="t", outcome="refused"),
        HistoryEntry(key=KEY, at=at(0, 23), action="hold", actor="t", outcome="ok"),
    ]
    r = report([stop(at(0, 20)), *noise, start(at(1, 8))])
    assert r.clusters[0].periods.window.stopped_hours == pytest.approx(H)


def test_second_stop_without_a_start_closes_the_first_night() -> None:
    r = report([stop(at(0, 20), outcome="failed"), stop(at(0, 22)), start(at(1, 8))])
    assert [round(n.night.hours, 1) for n in r.clusters[0].nights] == [2.0, 9.5]


@pytest.mark.parametrize("legacy", [False, True])
def test_shortfalls_at_start_are_listed_with_missing_nodes(legacy: bool) -> None:
    morning = start(at(1, 8), outcomes={"gpu": "partial 2/4", "ctl": "restored 1/1"}, legacy=legacy)
    r = report([stop(at(0, 20), legacy=legacy), morning])
    c = r.clusters[0]
    (s,) = c.shortfalls
    assert (s.group, s.outcome, s.current, s.target) == ("gpu", "partial", 2, 4)
    assert c.shortfall_nodes == 2 and r.shortfall_nodes == 2


def _two_clusters() -> Report:
    # train: two nights of 11.5 h (all released); other: one night of 11.5 h keeping its P5 group.
    entries = [
        stop(at(0, 20)),
        start(at(1, 8)),
        stop(at(1, 20)),
        start(at(2, 8)),
        stop(at(0, 20), {"gpu": "kept 4/4", "ctl": "stopped 0/0"}, key=OTHER),
        start(at(1, 8), key=OTHER),
    ]
    return report(entries, fsx={KEY: [FS]})


@pytest.mark.parametrize("period", PERIODS)
def test_every_total_row_is_the_sum_of_the_rows_above_it(period: str) -> None:
    r = _two_clusters()
    assert [c.key for c in r.clusters] == [OTHER, KEY]
    summed = sum((c.periods.get(period) for c in r.clusters), Figures())
    assert r.total.get(period) == summed
    # The same in what a user reads: the CSV's TOTAL row adds up the cluster rows of its period.
    rows = [row for row in csv_rows(r) if row["period"] == period]
    for column in ("saving_usd", "fsx_while_stopped_usd", "kept_usd", "avoided_node_hours"):
        assert rows[-1][column] == pytest.approx(sum(row[column] for row in rows[:-1]), abs=0.02)


def test_per_night_is_each_clusters_typical_night_and_per_month_projects_the_window() -> None:
    r = _two_clusters()
    other, train = r.clusters
    assert train.periods.per_night.saving == pytest.approx(400.25 * H)  # two equal nights: one of them
    assert other.periods.per_night.kept_cost == pytest.approx(400 * H)
    # A fleet night is one night of each cluster, not an average over cluster-nights.
    assert r.total.per_night.saving == pytest.approx(400.25 * H + 0.25 * H)
    assert r.total.per_night.kept_cost >= other.periods.per_night.kept_cost
    assert r.total.per_month.saving == pytest.approx(r.total.window.saving * 730 / (7 * 24))


def test_nightly_series_sums_the_fleet_per_night() -> None:
    r = _two_clusters()
    series = dict(nightly(r))
    assert list(series) == ["2026-11-02", "2026-11-03"]
    assert series["2026-11-02"].saving == pytest.approx((400.25 + 0.25) * H)
    assert series["2026-11-03"].saving == pytest.approx(400.25 * H)
    assert sum((f.saving for f in series.values()), 0.0) == pytest.approx(r.total.window.saving)


def test_the_document_names_the_source_of_every_price_it_used() -> None:
    doc = as_document(build_report([stop(at(0, 20)), start(at(1, 8))], {}, {KEY: [FS]}, bundled(), D0, at(7, 0)))
    items = {p["item"]: p for p in doc["prices"]}
    assert set(items) == {
        "instance_hourly ml.p5.48xlarge",
        "instance_hourly ml.m5.xlarge",
        "fsx_gb_month PERSISTENT_2/250",
    }
    p5 = items["instance_hourly ml.p5.48xlarge"]
    assert p5["estimate"] and p5["as_of"] == "2026-11-29" and "June 2025" in p5["note"]
    assert p5["unit"] == "USD per node-hour" and "aws.amazon.com" in p5["source"]
    assert items["fsx_gb_month PERSISTENT_2/250"]["unit"] == "USD per GB-month"


def test_a_cluster_with_fsx_but_no_nights_shows_up_with_zero_savings() -> None:
    r = report([], fsx={KEY: [FS]})
    assert [c.key for c in r.clusters] == [KEY] and r.nights == 0
    assert r.clusters[0].fsx_hourly == pytest.approx(2.0)
    assert as_document(r)["clusters"][0]["fsx_per_month"] == pytest.approx(1460.0)


def test_window_must_have_positive_length() -> None:
    with pytest.raises(UsageError, match=r"--until .* must be after --since"):
        report([], since=at(1, 0), until=at(1, 0))


def test_keep_cost_per_night() -> None:
    # The night is the schedule's (cost.rates): 20:00 to 08:00, 12 hours.
    nights = resolve("Mon-Fri 08:00-20:00 UTC", {})
    noon = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # a Tuesday
    assert keep_cost_per_night("ml.p5.48xlarge", 2, nights, noon, bundled()) == pytest.approx(2 * 12 * 98.32)
    assert keep_cost_per_night("ml.unknown.xlarge", 2, nights, noon, bundled()) is None
    assert keep_cost_per_night("ml.p5.48xlarge", 2, None, noon, bundled()) is None  # no schedule, no night
    with pytest.raises(UsageError, match="count -1"):
        keep_cost_per_night("ml.p5.48xlarge", -1, nights, noon, bundled())


_gaps = st.lists(st.tuples(st.floats(0.1, 30), st.floats(0.1, 30), st.floats(0, 2)), min_size=0, max_size=12)


@settings(max_examples=60, deadline=None)
@given(_gaps, st.floats(0, 200), st.floats(1, 400), st.booleans())
def test_nights_never_overlap_or_leave_the_window(
    gaps: list[tuple[float, float, float]], lo: float, span: float, keep_gpu: bool
) -> None:
    """Any alternation of stops and starts: stopped hours fit in the window and the money adds up."""
    outcomes = {"gpu": "kept 4/4" if keep_gpu else "stopped 0/0", "ctl": "stopped 0/0"}
    entries, clock = [], D0
    for running_h, stopped_h, start_h in gaps:
        clock += timedelta(hours=running_h)
        entries.append(stop(clock, outcomes))
        clock += timedelta(hours=stopped_h)
        entries.append(start(clock, duration_h=min(start_h, stopped_h)))
    since, until = D0 + timedelta(hours=lo), D0 + timedelta(hours=lo + span)
    t = report(entries, since=since, until=until).total.window
    assert 0 <= t.stopped_hours <= span + 1e-6
    assert t.avoided_node_hours + t.kept_node_hours == pytest.approx(5 * t.stopped_hours)
    assert t.saving == pytest.approx((0.25 if keep_gpu else 400.25) * t.stopped_hours)
    assert t.kept_cost == pytest.approx((400 if keep_gpu else 0) * t.stopped_hours)
    assert t.fsx_while_stopped == pytest.approx(2.0 * t.stopped_hours)
    r = report(entries, since=since, until=until)
    nights = [n.night for c in r.clusters for n in c.nights]
    for a, b in itertools.pairwise(nights):
        assert a.end <= b.start
    assert all(since <= n.start < n.end <= until for n in nights)


def test_a_night_of_seconds_is_not_shown_as_zero_node_hours_beside_its_saving() -> None:
    """The README's tour stops g5-dev and starts it seconds later (the emulator runs 600 times faster
    than the clock the store keeps): its saving is cents, and the report said "0.0 node-hours avoided"
    beside them (hours were rounded to a tenth, money to the cent)."""
    from hyperpod_scheduler.cli.report import report_listing

    stopped = at(0, 20)
    r = report([stop(stopped), start(stopped + timedelta(seconds=12), duration_h=1 / 3600)], until=at(1, 0))
    doc = as_document(r)
    window = doc["clusters"][0]["window"]
    assert window["saving"] > 0  # 5 nodes for 11 s: $1.23
    assert window["avoided_node_hours"] == pytest.approx(5 * 11 / 3600, rel=0.05)  # 0.015, not 0.0
    row = next(row for row in report_listing(r).rows if row[1] == "window")
    assert row[3] == "0.015", row


def test_per_month_is_the_same_whatever_window_holds_the_same_nights() -> None:
    """Issue 27 item 4: per month was the window projected to 730 hours, so a 30-day range over a week
    of nights gave a quarter of what a 7-day range gave. With the cluster's schedule it is the saving
    per stopped hour times the schedule's stopped hours in the month from the window's end."""
    office = resolve("Mon-Fri 08:00-20:00 UTC", {})
    week = [e for day in range(4) for e in (stop(at(day, 20)), start(at(day + 1, 8), duration_h=0))]
    until = at(7, 0)
    narrow = build_report(week, {}, {KEY: [FS]}, PRICES, at(0, 0), until, schedules={KEY: office})
    wide = build_report(week, {}, {KEY: [FS]}, PRICES, until - timedelta(days=30), until, schedules={KEY: office})
    for period in ("window", "per_night", "per_month"):
        assert narrow.clusters[0].periods.get(period) == wide.clusters[0].periods.get(period), period
    month = narrow.clusters[0].periods.per_month
    per_stopped_hour = narrow.clusters[0].periods.window.saving / narrow.clusters[0].periods.window.stopped_hours
    assert month.saving == pytest.approx(per_stopped_hour * money(1.0, office, until).month_hours)
    assert month.stopped_hours == pytest.approx(money(1.0, office, until).month_hours)
    # FSx a month in all is the file system's rate over 730 hours, wherever it is shown.
    assert as_document(narrow)["clusters"][0]["fsx_per_month"] == pytest.approx(2.0 * 730)
