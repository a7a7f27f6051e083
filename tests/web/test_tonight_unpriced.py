"""Tonight of a cluster whose stop keeps a group with no price (a flexible InstanceRequirements group,
or a type the price list lacks): nodes bill, an amount not known. The kept groups' prices were summed
with None as 0, so it read "no instances bill" beside "1 × flexible kept"."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from hyperpod_scheduler.app.status import StatusRow
from hyperpod_scheduler.engine.stop_forecast import GroupForecast, StopForecast
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.web.tonight import tonight

NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # a Tuesday: the night begins at 20:00


class Prices:
    def instance(self, itype: str) -> Any:
        return SimpleNamespace(usd=10.0) if itype == "ml.m5.xlarge" else None


def test_a_kept_group_with_no_price_bills_an_unknown_amount() -> None:
    ctx: Any = SimpleNamespace(now=lambda: NOON, prices=Prices, paused=None)
    g: Any = SimpleNamespace(schedule=resolve("Mon-Fri 08:00-20:00 UTC", {}))
    row = StatusRow("a/us-east-1/c", "c", "us-east-1", "office", None, "running", None, {}, None, (), (), None)
    forecast = StopForecast(
        "sends",
        (
            GroupForecast("flex", None, 2, 1, "policy floor 1", "floor"),
            GroupForecast("head", "ml.m5.xlarge", 1, 1, "policy floor 1", "floor"),
            GroupForecast("cpu", "ml.m5.xlarge", 4, 0),
        ),
    )
    shown = tonight(ctx, g, row, forecast)
    assert shown["bills"] is True and shown["usd"] is None and shown["usd_per_hour"] is None, shown
    assert [k["group"] for k in shown["kept"]] == ["flex", "head"]


def test_a_stop_previews_saving_is_unknown_when_a_group_it_releases_has_no_price(monkeypatch: Any) -> None:
    from hyperpod_scheduler.web import manual

    view = SimpleNamespace(
        groups=[
            SimpleNamespace(name="flex", instance_type=None, instance_types=(), current=2, target=2),
            SimpleNamespace(
                name="cpu", instance_type="ml.m5.xlarge", instance_types=("ml.m5.xlarge",), current=4, target=4
            ),
        ]
    )
    ctx = SimpleNamespace(now=lambda: NOON, prices=Prices, store=SimpleNamespace(get=lambda key: None))
    dash: Any = SimpleNamespace(
        context=lambda: ctx,
        target=lambda c, name, place: (None, SimpleNamespace(key="a/us-east-1/c", name="c")),
        describe_cached=lambda c, ref: view,
    )
    forecast = StopForecast("sends", (GroupForecast("flex", None, 2, 0), GroupForecast("cpu", "ml.m5.xlarge", 4, 0)))
    monkeypatch.setattr(manual, "stop_forecast", lambda c, ref, v: forecast)
    shown = manual.preview(dash, "c", "stop")
    # It said "Stops billing $40.00/h" for 4 m5s and 2 nodes of a flexible group.
    assert shown["usd_per_hour_saved"] is None and shown["usd_per_hour_after"] == 0, shown


def test_a_week_not_billed_is_unknown_when_a_group_the_stop_releases_has_no_price() -> None:
    from hyperpod_scheduler.store.records import ClusterRecord, GroupSize, Snapshot
    from hyperpod_scheduler.web.schedules_view import _releasable

    sizes = {"flex": GroupSize(count=2, instance_type=None), "cpu": GroupSize(count=4, instance_type="ml.m5.xlarge")}
    record = ClusterRecord.new("a/us-east-1/c", NOON).evolve(
        snapshot=Snapshot(taken_at=NOON, sizes=sizes, transition_id="t", reason="stop")
    )
    ctx: Any = SimpleNamespace(prices=Prices, store=SimpleNamespace(get=lambda key: record))
    forecast = StopForecast("sends", (GroupForecast("flex", None, 2, 0), GroupForecast("cpu", "ml.m5.xlarge", 4, 0)))
    dash: Any = SimpleNamespace(stop_forecast=lambda c, ref, schedule: forecast)
    g: Any = SimpleNamespace(ref=SimpleNamespace(key="a/us-east-1/c"), schedule=None)
    assert _releasable(dash, ctx, [g])[0] is None  # it was $40/h: the m5s alone
