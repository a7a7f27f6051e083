"""What the approval page shows beside the question: how many nodes the release hands back, what a
night of them costs (saved if approved, billing if refused), and the stop in the viewer's zone.

A page a person decides from (issue 27 item 3). Read-only: the cluster as DescribeCluster last showed
it, the price table, and the schedule's next start after the stop (the night's length).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from hyperpod_scheduler.app.wording import when
from hyperpod_scheduler.cost.prices import PriceTable
from hyperpod_scheduler.cost.rates import money
from hyperpod_scheduler.schedule import Schedule


def _short(type_text: str | None) -> str:
    """``p5.48xlarge``, or a flexible group's ``flexible p5.48xlarge|p4d.24xlarge`` (GroupView.type_text:
    a group with InstanceRequirements has no InstanceType, and '4 × ?' told the approver nothing)."""
    if not type_text:
        return "type not known"
    return " ".join("|".join(t.removeprefix("ml.") for t in word.split("|")) for word in type_text.split(" "))


def figures(
    groups: Iterable[str],
    view: Any,
    prices: PriceTable,
    schedule: Schedule | None,
    stop_at: datetime,
    expires_at: datetime | None = None,
) -> dict[str, Any]:
    """Per group the node count, type and $/h; the night (stop to the schedule's next start) in hours;
    what the release saves a night, which is what refusing keeps billing. ``view``: a ClusterView, or
    the exception DescribeCluster raised (the counts are then unknown, and the page says so)."""
    names = list(groups)
    zone = schedule.timezone if schedule is not None else None
    rows: list[dict[str, Any]] = []
    known = not isinstance(view, Exception) and view is not None
    hourly_total: float | None = 0.0
    for name in names:
        g = view.group(name) if known else None
        count = max(g.current, g.target) if g is not None else None
        itype = g.instance_type if g is not None else None
        price = prices.instance(itype) if itype else None
        hourly = round(price.usd * count, 2) if price is not None and count is not None else None
        if hourly is None:
            hourly_total = None
        elif hourly_total is not None:
            hourly_total += hourly
        nodes = f"{count} × {_short(g.type_text)}" if g is not None else "node count not known"
        rows.append({"group": name, "count": count, "instance_type": itype, "usd_per_hour": hourly, "nodes": nodes})
    # The night the stop begins (cost.rates: the one formula of every per-night figure), from the stop.
    figures_at = money(hourly_total, schedule, stop_at)
    start = figures_at.night[1] if figures_at.night is not None else None
    hours = round(figures_at.night_hours, 1) if start is not None else None
    night = round(figures_at.per_night, 2) if figures_at.per_night is not None else None
    return {
        "rows": rows,
        "nodes_text": ", ".join(r["nodes"] for r in rows),
        "usd_per_hour": round(hourly_total, 2) if hourly_total is not None else None,
        "night_hours": hours,
        "restart": start.isoformat() if start is not None else None,
        "usd_per_night": night,
        # In the schedule's zone without JavaScript; app.js rewrites it in the viewer's own zone.
        "stop_local": when(stop_at, zone),
        "expires_local": when(expires_at or stop_at, zone),
    }


__all__ = ["figures"]
