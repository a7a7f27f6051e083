"""A report as plain data: the JSON document and the CSV rows (every table and page is built from these)."""

from __future__ import annotations

import csv
import io
from dataclasses import asdict
from typing import Any

from hyperpod_scheduler.cost.savings import PERIODS, ClusterCost, Figures, Periods, Report, nightly
from hyperpod_scheduler.store.records import LEGACY_ACCOUNT

CSV_COLUMNS = (
    "cluster",
    "period",
    "nights",
    "stopped_hours",
    "avoided_node_hours",
    "saving_usd",
    "fsx_while_stopped_usd",
    "kept_node_hours",
    "kept_usd",
    "shortfall_nodes",
    "price_is_upper_bound",  # saving_usd and kept_usd price a flexible group at its dearest type
)
UNITS = {
    "instance_hourly": "USD per node-hour",
    "fsx_gb_month": "USD per GB-month",
    "fsx_mbps_month": "USD per MB/s-month",
}


def _hours(value: float) -> float:
    """To 0.1 h; a figure under 0.1 h that is not zero keeps two significant digits, so a night of
    seconds (the README's tour) reads 0.013 node-hours beside its cents, never 0.0."""
    if value and abs(value) < 0.1:
        return float(f"{value:.2g}")
    return round(value, 1)


def figures(values: Figures) -> dict[str, float]:
    """Hours to 0.1 (two significant digits below it), money to the cent."""
    return {k: _hours(v) if k.endswith("hours") else round(v, 2) for k, v in asdict(values).items()}


def periods(p: Periods) -> dict[str, dict[str, float]]:
    return {period: figures(p.get(period)) for period in PERIODS}


def _cluster(c: ClusterCost) -> dict[str, Any]:
    return {
        "key": c.key,
        "cluster": c.name,
        "nights": c.night_count,
        "released_anything": c.released_anything,
        # A flexible group was priced at the dearest type it may run: saving and kept cost are "up to".
        "price_is_upper_bound": c.price_is_upper_bound,
        "upper_bound_groups": sorted(c.upper_bound_groups),
        **periods(c.periods),
        "shortfall_nodes": c.shortfall_nodes,
        "fsx_per_month": round(c.fsx_per_month, 2),
        "per_month_from": c.per_month_from,
        "file_systems": [
            {
                "id": fs.id,
                "type": fs.file_system_type,
                "label": fs.label,
                "storage_gib": fs.storage_gib,
                "deployment_type": fs.deployment_type,
                "throughput": fs.throughput,
                "found_by": list(fs.found_by),
            }
            for fs in c.file_systems
        ],
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
                "from": n.night.start.isoformat(),
                "to": n.night.end.isoformat(),
                "hours": round(n.night.hours, 2),
                "ongoing": n.night.ongoing,
                "sizes_from": n.night.sizes_from,
                "price_is_upper_bound": n.price_is_upper_bound,
                **figures(n.figures),
                "groups": {
                    g.group: {
                        "instance_type": g.instance_type,
                        "instance_types": list(g.types),
                        "recorded": g.recorded,
                        "running": g.running,
                        "outcome": g.outcome,
                    }
                    for g in n.night.groups
                },
            }
            for n in c.nights
        ],
        "unpriced": sorted(c.unpriced),
    }


def labels(clusters: list[ClusterCost]) -> list[str]:
    """The name every face calls each cluster by: its name, and where two records share the name (two
    accounts' ``train``), its account and region from its key, so the two are told apart."""
    names = [c.name for c in clusters]
    out = []
    for c in clusters:
        label = c.name
        if names.count(label) > 1:
            account, _, rest = c.key.partition("/")
            label = f"{label} (account {'?' if account == LEGACY_ACCOUNT else account} {rest.rsplit('/', 1)[0]})"
        out.append(label)
    return out


def as_document(report: Report) -> dict[str, Any]:
    """The whole report as JSON-ready data: what ``report --json``, the dashboard and its API return."""
    return {
        "since": report.since.isoformat(),
        "until": report.until.isoformat(),
        "currency": "USD",
        "price_sources": list(report.price_sources),
        "prices": [
            {
                "item": item,
                "unit": UNITS.get(item.split(" ", 1)[0], "USD"),
                "usd": price.usd,
                "source": price.source,
                "as_of": price.as_of,
                "estimate": price.estimate,
                "note": price.note,
                "described": price.describe(),
            }
            for item, price in report.prices_used.items()
        ],
        "notes": list(report.notes),
        "clusters": [
            {**_cluster(c), "label": label} for c, label in zip(report.clusters, labels(report.clusters), strict=True)
        ],
        "total": {
            "nights": report.nights,
            "price_is_upper_bound": report.price_is_upper_bound,
            **periods(report.total),
            "shortfall_nodes": report.shortfall_nodes,
            "fsx_per_month": round(sum(c.fsx_per_month for c in report.clusters), 2),
        },
        "nightly": [{"night": day, **figures(f)} for day, f in nightly(report)],
        "reserved_idle": [
            {
                "cluster": r.key.rsplit("/", 1)[-1],
                "key": r.key,
                "plan": r.plan,
                "instance_type": r.instance_type,
                "idle_instance_hours": round(r.idle_instance_hours, 2),
                "cost": None if r.cost is None else round(r.cost, 2),
                "currency": r.currency,
            }
            for r in report.reserved_idle
        ],
    }


def csv_rows(report: Report) -> list[dict[str, Any]]:
    """One row per cluster and period, then the total's rows (cluster ``TOTAL``)."""
    rows: list[dict[str, Any]] = []
    named = [
        (label, c.periods, c.night_count, c.shortfall_nodes, c.price_is_upper_bound)
        for c, label in zip(report.clusters, labels(report.clusters), strict=True)
    ]
    total = ("TOTAL", report.total, report.nights, report.shortfall_nodes, report.price_is_upper_bound)
    for name, p, nights, short, bound in [*named, total]:
        for period in PERIODS:
            values = figures(p.get(period))
            rows.append(
                {
                    "cluster": name,
                    "period": period,
                    "nights": nights,
                    "stopped_hours": values["stopped_hours"],
                    "avoided_node_hours": values["avoided_node_hours"],
                    "saving_usd": values["saving"],
                    "fsx_while_stopped_usd": values["fsx_while_stopped"],
                    "kept_node_hours": values["kept_node_hours"],
                    "kept_usd": values["kept_cost"],
                    "shortfall_nodes": short,
                    "price_is_upper_bound": bound,
                }
            )
    return rows


def csv_text(report: Report) -> str:
    """The CSV file's text (written by the caller, through the one checked writer)."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    writer.writerows(csv_rows(report))
    return buffer.getvalue()
