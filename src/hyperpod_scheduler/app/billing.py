"""What a cluster bills now, from its record and its history (no AWS call): the groups a stop left
running, and the hourly figure of a running, stopping, starting or stopped cluster. One builder for
``status`` and the Fleet page (``app.status``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hyperpod_scheduler.cost.prices import PriceTable, group_price
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
    price_is_upper_bound: bool = False  # a flexible group priced at its dearest type: "up to"
    instance_types: tuple[str, ...] = ()  # every type it may run (several: a flexible group)

    @property
    def type_text(self) -> str | None:
        return self.instance_type or flexible_text(self.instance_types)


def flexible_text(types: Sequence[str]) -> str | None:
    """A group's types for people when it has no one InstanceType: ``flexible p5.48xlarge|p4d.24xlarge``."""
    if not types:
        return None
    return types[0] if len(types) == 1 else "flexible " + "|".join(t.removeprefix("ml.") for t in types)


def one_type(types: Sequence[str]) -> str | None:
    """The one type a group runs; None for a flexible group of several (``instance_types`` lists them)."""
    return types[0] if len(types) == 1 else None


def last_line(lines: list[HistoryEntry], action: str, outcomes: tuple[str, ...]) -> HistoryEntry | None:
    return next((e for e in lines if e.action == action and e.outcome in outcomes), None)  # newest first


def line_types(line: HistoryEntry | None, record: ClusterRecord | None) -> dict[str, tuple[str, ...]]:
    """Every type each group may run, from the snapshot and the stop line's sizes (the line wins)."""
    types: dict[str, tuple[str, ...]] = {}
    if record is not None and record.snapshot is not None:
        types.update({n: s.types for n, s in record.snapshot.sizes.items()})
    sizes = line.detail.get("sizes") if line is not None else None
    if isinstance(sizes, Mapping):
        for n, v in sizes.items():
            if not isinstance(v, Mapping):
                continue
            listed = v.get("instance_types")
            if isinstance(listed, list) and listed and all(isinstance(t, str) and t for t in listed):
                types[str(n)] = tuple(listed)
            elif isinstance(v.get("instance_type"), str):
                types[str(n)] = (v["instance_type"],)
    return types


def hourly_of(prices: PriceTable, types: Sequence[str], count: int) -> tuple[float, bool] | None:
    """(USD an hour for ``count`` nodes of a group that may run ``types``, whether that is an upper
    bound), from ``cost.prices.group_price``; None when unpriced."""
    price = group_price(types, prices)
    return None if price is None else (price.times(count), price.upper_bound)


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
            itypes = types.get(o.group, ())
            cost = hourly_of(prices, itypes, o.current)
            bound = cost is not None and cost[1]
            out.append(Billing(o.group, o.current, one_type(itypes), cost[0] if cost else None, bound, itypes))
    return tuple(sorted(out, key=lambda b: -(b.usd_per_hour or 0.0)))  # what costs most first


def hourly_now(
    state: str,
    record: ClusterRecord | None,
    lines: list[HistoryEntry],
    billing: tuple[Billing, ...],
    prices: PriceTable,
) -> tuple[float, bool] | None:
    """What the cluster bills an hour now, and whether that is an upper bound (a flexible group priced
    at its dearest type); None when not known."""
    if state == "stopped":
        if any(b.usd_per_hour is None for b in billing):
            return None  # a group with no price: what bills is not known, not $0 for it
        return sum(b.usd_per_hour or 0.0 for b in billing), any(b.price_is_upper_bound for b in billing)
    if state == "starting" and record is not None and record.pending is not None:
        return _hourly_starting(record, lines, prices)
    if state not in ("running", "stopping"):  # stopping: every node bills until it is terminated
        return None
    # Running: the sizes the last stop recorded (or what the last start restored), priced.
    return _priced_sizes(record, lines, prices, restored=True)


def hourly_up(record: ClusterRecord | None, lines: list[HistoryEntry], prices: PriceTable) -> tuple[float, bool] | None:
    """What the cluster bills an hour once a start has brought back the sizes its last stop recorded
    (a stopped cluster held running: the next tick starts it, and everything bills); None when not known."""
    return _priced_sizes(record, lines, prices, restored=False)


def _priced_sizes(
    record: ClusterRecord | None, lines: list[HistoryEntry], prices: PriceTable, *, restored: bool
) -> tuple[float, bool] | None:
    """The sizes the last stop recorded, priced; ``restored``: as the last start brought them back."""
    stop = last_line(lines, "stop", ("ok", "noop", "failed"))
    sizes: dict[str, int] = {}
    if record is not None and record.snapshot is not None:
        sizes = {n: s.count for n, s in record.snapshot.sizes.items()}
    elif stop is not None and isinstance(stop.detail.get("sizes"), Mapping):
        sizes = {str(n): int(v.get("count", 0)) for n, v in stop.detail["sizes"].items() if isinstance(v, Mapping)}
    start = last_line(lines, "start", ("ok", "failed")) if restored else None
    if start is not None:
        sizes.update({o.group: o.current for o in read_outcomes(start.detail).values()})
    if not sizes:
        return None
    types = line_types(stop, record)
    hourly = [hourly_of(prices, types.get(n, ()), c) for n, c in sizes.items() if c]
    if any(h is None for h in hourly):
        return None
    return sum(h[0] for h in hourly if h), any(h[1] for h in hourly if h)


def _hourly_starting(record: ClusterRecord, lines: list[HistoryEntry], prices: PriceTable) -> tuple[float, bool] | None:
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
    total, bound = 0.0, False
    for group in dict.fromkeys([*kept, *pending.targets]):
        phases = pending.phases.get(group)
        launched = phases.in_setup + phases.in_checks + phases.running if phases is not None else 0
        count = max(kept.get(group, 0), launched)
        if not count:
            continue
        hourly = hourly_of(prices, types.get(group, ()), count)
        if hourly is None:
            return None
        total += hourly[0]
        bound = bound or hourly[1]
    return total, bound


__all__ = [
    "Billing",
    "flexible_text",
    "hourly_now",
    "hourly_of",
    "last_line",
    "left_billing",
    "line_types",
    "one_type",
]
