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
    ctx: Any = SimpleNamespace(now=lambda: NOON, prices=Prices)
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
