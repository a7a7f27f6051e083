"""A flexible instance group (InstanceRequirements: several types, no InstanceType) is priced at the
dearest type it may run, labelled as an upper bound; one type without a price leaves the group unpriced,
never $0 nor the known types' maximum (issue 26, case 4: "prices must read every type a group may run")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hyperpod_scheduler.app.wording import usd
from hyperpod_scheduler.cli.report import report_listing
from hyperpod_scheduler.cost.prices import Price, PriceTable, group_price
from hyperpod_scheduler.cost.savings import build_report, keep_cost_per_night
from hyperpod_scheduler.cost.summary import as_document, csv_rows
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.records import HistoryEntry

KEY = "default/us-east-1/flex"
P5, P4D, G6 = "ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.g6.48xlarge"
TABLE = PriceTable({P5: Price(98.32, "t"), P4D: Price(37.69, "t"), G6: Price(13.35, "t")}, {}, ("t",))
D0 = datetime(2026, 11, 2, 20, tzinfo=UTC)


def test_a_flexible_group_is_priced_at_its_dearest_type_as_an_upper_bound() -> None:
    price = group_price((G6, P5, P4D), TABLE)
    assert price is not None
    assert price.usd == 98.32 and price.instance_type == P5 and price.upper_bound


def test_a_plain_group_and_a_flexible_group_of_one_type_are_priced_exactly() -> None:
    for types in ((P4D,), (P4D, P4D)):
        price = group_price(types, TABLE)
        assert price is not None and price.usd == 37.69 and not price.upper_bound


def test_one_unpriced_type_leaves_the_flexible_group_unpriced_not_zero_nor_the_known_maximum() -> None:
    assert group_price((P4D, "ml.p6-b200.48xlarge"), TABLE) is None  # the unpriced one may be the dearest
    assert group_price((), TABLE) is None
    nights = resolve("Mon-Fri 08:00-20:00 UTC", {})
    noon = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert keep_cost_per_night((P4D, "ml.p6-b200.48xlarge"), 2, nights, noon, TABLE) is None
    kept = keep_cost_per_night((P4D, P5), 2, nights, noon, TABLE)
    assert kept is not None and kept.usd == 2 * 12 * 98.32 and kept.upper_bound


@given(st.lists(st.sampled_from([P5, P4D, G6]), min_size=1, max_size=6))
def test_the_price_is_the_maximum_of_the_types_and_a_bound_only_when_they_differ(types: list[str]) -> None:
    price = group_price(types, TABLE)
    assert price is not None
    assert price.usd == max(TABLE.instance_hourly[t].usd for t in types)
    assert price.upper_bound == (len(set(types)) > 1)


def test_the_words_say_up_to() -> None:
    assert usd(98.32, up_to=True) == "up to $98.32"
    assert usd(None, up_to=True) == "-"  # unknown stays unknown


def _night(sizes: dict[str, Any]) -> list[HistoryEntry]:
    outcomes = {g: {"outcome": "stopped", "current": 0, "target": 0} for g in sizes}
    stop = HistoryEntry(
        key=KEY,
        at=D0,
        action="stop",
        actor="t",
        outcome="ok",
        duration_s=600,
        detail={"outcomes": outcomes, "sizes": sizes},
    )
    back = {g: {"outcome": "restored", "current": s["count"], "target": s["count"]} for g, s in sizes.items()}
    start = HistoryEntry(
        key=KEY,
        at=D0 + timedelta(hours=10),
        action="start",
        actor="t",
        outcome="ok",
        duration_s=0,
        detail={"outcomes": back},
    )
    return [stop, start]


FLEX = {"gpu": {"count": 4, "instance_type": None, "instance_types": [P4D, P5, G6]}}


def test_a_report_saves_up_to_the_dearest_type_and_says_so_in_every_form() -> None:
    rep = build_report(_night(FLEX), {}, {}, TABLE, D0, D0 + timedelta(days=1))
    doc = as_document(rep)
    cluster = doc["clusters"][0]
    assert cluster["window"]["saving"] == round(4 * 10 * 98.32, 2)  # the dearest type, P5
    assert cluster["price_is_upper_bound"] is True and cluster["upper_bound_groups"] == ["gpu"]
    assert doc["total"]["price_is_upper_bound"] is True
    assert cluster["stopped_intervals"][0]["price_is_upper_bound"] is True
    assert cluster["stopped_intervals"][0]["groups"]["gpu"]["instance_types"] == [P4D, P5, G6]
    assert [p["item"] for p in doc["prices"]] == [f"instance_hourly {P5}"]
    listing = report_listing(rep)
    assert f"up to {usd(4 * 10 * 98.32)}" in [cell for row in listing.rows for cell in row]
    assert any("priced at the dearest" in n for n in listing.notes)
    assert {r["price_is_upper_bound"] for r in csv_rows(rep)} == {True}  # the cluster's rows and TOTAL's


def test_a_plain_report_has_no_bound() -> None:
    plain = {"gpu": {"count": 4, "instance_type": P5}}
    doc = as_document(build_report(_night(plain), {}, {}, TABLE, D0, D0 + timedelta(days=1)))
    assert doc["clusters"][0]["price_is_upper_bound"] is False
    assert not any(
        "up to" in cell
        for row in report_listing(build_report(_night(plain), {}, {}, TABLE, D0, D0 + timedelta(days=1))).rows
        for cell in row
    )


def test_a_report_with_an_unpriced_flexible_type_counts_nothing_and_names_the_group() -> None:
    table = PriceTable({P5: Price(98.32, "t"), P4D: Price(37.69, "t")}, {}, ("t",))  # no g6 price
    doc = as_document(build_report(_night(FLEX), {}, {}, table, D0, D0 + timedelta(days=1)))
    cluster = doc["clusters"][0]
    assert cluster["window"]["saving"] == 0.0
    assert cluster["unpriced"] == [f"flexible {P4D}|{P5}|{G6}"]
    assert cluster["price_is_upper_bound"] is False
