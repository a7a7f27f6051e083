"""The Savings page: the cost report over a range, with cumulative figures and charts."""

from __future__ import annotations

from typing import Any

from hyperpod_scheduler.app import report as reports
from hyperpod_scheduler.app.instants import parse_instant
from hyperpod_scheduler.cost import summary
from hyperpod_scheduler.web.charts import savings_charts
from hyperpod_scheduler.web.core import DashboardCore


def savings(
    dash: DashboardCore,
    since_text: str | None = None,
    until_text: str | None = None,
    names: tuple[str, str] = ("since", "until"),
) -> dict[str, Any]:
    """``names``: the face's own for the two (the query's; ``report --html``'s options)."""
    ctx = dash.context()
    until = parse_instant(until_text, names[1]) if until_text else None
    since = parse_instant(since_text, names[0]) if since_text else None
    notes: list[str] = []
    start, end = reports.window(ctx.now(), since, until, notes, names=names)
    doc = summary.as_document(dash.report(ctx, start, end, notes=notes))
    nights = doc["nightly"]
    cumulative, total = [], 0.0
    for n in nights:
        total += n["saving"]
        cumulative.append(round(total, 2))
    doc["cumulative_saving"] = cumulative
    doc["charts"] = savings_charts(nights, cumulative)
    return doc
