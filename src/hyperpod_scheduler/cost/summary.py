"""A report as plain data: the JSON document and the CSV rows (the table view is built from these)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from hyperpod_scheduler.cost.prices import HOURS_PER_MONTH
from hyperpod_scheduler.cost.savings import ClusterCost, Report, Totals

CSV_COLUMNS = (
    "cluster",
    "period",
    "nights",
    "stopped_hours",
    "avoided_node_hours",
    "avoided_cost_usd",
    "fsx_residual_usd",
    "protected_cost_usd",
    "net_saving_usd",
    "shortfall_nodes",
)
PERIODS = ("window", "per_night", "per_month")


def _money(value: float) -> float:
    return round(value, 2)


def figures(report: Report, totals: Totals) -> dict[str, dict[str, float]]:
    """The same figures for the whole window, per night and per month (projected from the window)."""
    window = totals.scaled(1.0)
    out: dict[str, dict[str, float]] = {}
    for period, values in (
        ("window", window),
        ("per_night", report.per_night(totals)),
        ("per_month", report.per_month(totals)),
    ):
        out[period] = {k: round(v, 1) if k.endswith("hours") else _money(v) for k, v in values.items()}
    return out


def _cluster(report: Report, c: ClusterCost) -> dict[str, Any]:
    return {
        "key": c.key,
        "cluster": c.name,
        "nights": c.totals.nights,
        **figures(report, c.totals),
        "shortfall_nodes": c.totals.shortfall_nodes,
        "file_systems": [
            {
                "id": fs.id,
                "storage_gib": fs.storage_gib,
                "deployment_type": fs.deployment_type,
                "throughput_mbps_per_tib": fs.throughput,
                "found_by": fs.found_by,
            }
            for fs in c.file_systems
        ],
        "fsx_per_month": _money(c.fsx_hourly * HOURS_PER_MONTH),
        "shortfalls": [
            {
                "at": s.at.isoformat(),
                "group": s.group,
                "outcome": s.outcome,
                "restored": s.current,
                "wanted": s.target,
                "instance_type": s.instance_type,
            }
            for s in c.shortfalls
        ],
        "stopped_intervals": [
            {
                "from": n.start.isoformat(),
                "to": n.end.isoformat(),
                "hours": round(n.hours, 2),
                "ongoing": n.ongoing,
                "sizes_from": n.sizes_from,
                "groups": {
                    g.group: {
                        "instance_type": g.instance_type,
                        "recorded": g.recorded,
                        "running": g.running,
                        "outcome": g.outcome,
                    }
                    for g in n.groups
                },
            }
            for n in c.nights
        ],
        "unpriced": sorted(c.unpriced),
    }


def as_document(report: Report) -> dict[str, Any]:
    return {
        "since": report.since.isoformat(),
        "until": report.until.isoformat(),
        "currency": "USD",
        "price_sources": list(report.price_sources),
        "notes": list(report.notes),
        "clusters": [_cluster(report, c) for c in report.clusters],
        "total": {
            "nights": report.total.nights,
            **figures(report, report.total),
            "shortfall_nodes": report.total.shortfall_nodes,
        },
    }


def csv_rows(report: Report) -> list[dict[str, Any]]:
    """One row per cluster and period, then the total's rows (cluster ``TOTAL``)."""
    rows: list[dict[str, Any]] = []
    for name, totals in [*((c.name, c.totals) for c in report.clusters), ("TOTAL", report.total)]:
        for period, values in figures(report, totals).items():
            rows.append(
                {
                    "cluster": name,
                    "period": period,
                    "nights": totals.nights,
                    "stopped_hours": values["stopped_hours"],
                    "avoided_node_hours": values["avoided_node_hours"],
                    "avoided_cost_usd": values["avoided_cost"],
                    "fsx_residual_usd": values["fsx_residual"],
                    "protected_cost_usd": values["protected_cost"],
                    "net_saving_usd": values["net_saving"],
                    "shortfall_nodes": totals.shortfall_nodes,
                }
            )
    return rows


def write_csv(report: Report, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(csv_rows(report))
