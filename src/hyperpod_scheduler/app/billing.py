"""What a cluster bills now, from its record and its history (no AWS call): the groups a stop left
running, and the hourly figure of a running, stopping, starting or stopped cluster. One builder for
``status`` and the Fleet page (``app.status``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hyperpod_scheduler.cost.prices import PriceTable
from hyperpod_scheduler.store.outcomes import read_outcomes
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry


@dataclass(frozen=True)
class Billing:
    """A group with nodes while its cluster is stopped (kept by a guard or a policy, or a scale-in that
    did not finish): what still bills, and its price per hour (None when unpriced)."""

    group: str
    count: int
    instance_type: str | None
    usd_per_hour: float | None


def last_line(lines: list[HistoryEntry], action: str, outcomes: tuple[str, ...]) -> HistoryEntry | None:
    return next((e for e in lines if e.action == action and e.outcome in outcomes), None)  # newest first


def line_types(line: HistoryEntry | None, record: ClusterRecord | None) -> dict[str, str | None]:
    types: dict[str, str | None] = {}
    if record is not None and record.snapshot is not None:
        types.update({n: s.instance_type for n, s in record.snapshot.sizes.items()})
    sizes = line.detail.get("sizes") if line is not None else None
    if isinstance(sizes, Mapping):
        for n, v in sizes.items():
            if isinstance(v, Mapping) and isinstance(v.get("instance_type"), str):
                types[str(n)] = v["instance_type"]
    return types


def hourly_of(prices: PriceTable, instance_type: str | None, count: int) -> float | None:
    price = prices.instance(instance_type) if instance_type else None
    return None if price is None else price.usd * count


def left_billing(record: ClusterRecord | None, lines: list[HistoryEntry], prices: PriceTable) -> tuple[Billing, ...]:
    """The groups the last stop left with nodes (a stop that kept everything sent nothing, and its line
    still says what stayed up)."""
    line = last_line(lines, "stop", ("ok", "noop", "failed"))
    if line is None:
        return ()
    types = line_types(line, record)
    out = []
    for o in read_outcomes(line.detail).values():
        if o.current > 0:
            itype = types.get(o.group)
            out.append(Billing(o.group, o.current, itype, hourly_of(prices, itype, o.current)))
    return tuple(sorted(out, key=lambda b: -(b.usd_per_hour or 0.0)))  # what costs most first


def hourly_now(
    state: str,
    record: ClusterRecord | None,
    lines: list[HistoryEntry],
    billing: tuple[Billing, ...],
    prices: PriceTable,
) -> float | None:
    if state == "stopped":
        return sum(b.usd_per_hour or 0.0 for b in billing)
    if state == "starting" and record is not None and record.pending is not None:
        return _hourly_starting(record, lines, prices)
    if state not in ("running", "stopping"):  # stopping: every node bills until it is terminated
        return None
    # Running: the sizes the last stop recorded (or what the last start restored), priced.
    stop = last_line(lines, "stop", ("ok", "noop", "failed"))
    sizes: dict[str, int] = {}
    if record is not None and record.snapshot is not None:
        sizes = {n: s.count for n, s in record.snapshot.sizes.items()}
    elif stop is not None and isinstance(stop.detail.get("sizes"), Mapping):
        sizes = {str(n): int(v.get("count", 0)) for n, v in stop.detail["sizes"].items() if isinstance(v, Mapping)}
    start = last_line(lines, "start", ("ok", "failed"))
    if start is not None:
        sizes.update({o.group: o.current for o in read_outcomes(start.detail).values()})
    if not sizes:
        return None
    types = line_types(stop, record)
    hourly = [hourly_of(prices, types.get(n), c) for n, c in sizes.items() if c]
    return None if any(h is None for h in hourly) else sum(h or 0.0 for h in hourly)


def _hourly_starting(record: ClusterRecord, lines: list[HistoryEntry], prices: PriceTable) -> float | None:
    """A start in flight bills every node that has come up so far: per group, the nodes its latest look
    found in lifecycle setup, in health checks or running (an instance bills from its lifecycle setup,
    not while it is still being provisioned), and never fewer than the last stop kept up (a group kept at
    a floor bills while the rest comes back). A group with nodes and no price makes the figure unknown
    (None), as for a running cluster."""
    pending = record.pending
    assert pending is not None
    stop = last_line(lines, "stop", ("ok", "noop", "failed"))
    kept = {o.group: o.current for o in read_outcomes(stop.detail).values()} if stop is not None else {}
    types = line_types(stop, record)
    total = 0.0
    for group in dict.fromkeys([*kept, *pending.targets]):
        phases = pending.phases.get(group)
        launched = phases.in_setup + phases.in_checks + phases.running if phases is not None else 0
        count = max(kept.get(group, 0), launched)
        if not count:
            continue
        hourly = hourly_of(prices, types.get(group), count)
        if hourly is None:
            return None
        total += hourly
    return total


__all__ = ["Billing", "hourly_now", "hourly_of", "last_line", "left_billing", "line_types"]
