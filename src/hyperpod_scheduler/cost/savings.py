"""Savings maths: pure functions from the action history to nights, hours and dollars.

What is read (and nothing else):

- ``HistoryEntry`` with ``action == "stop"`` and ``outcome`` ``"ok"`` or ``"failed"`` (a stop that
  settled, fully or not). It opens a *night* at ``at`` (the moment the scale-in settled: billing is
  counted as avoided only once nodes are gone, which under-counts the scale-in itself).
- The next such ``"start"`` entry of the same key closes the night at ``at - duration_s`` (when the
  start was sent: nodes bill again from launch). Its ``detail["outcomes"]`` gives the shortfalls.
  A stop followed by another stop closes the first night there. A night still open at ``until`` is
  counted up to ``until``. Nights are clipped to ``[since, until)``.
- ``"noop"`` and ``"refused"`` entries, holds and releases are ignored: nothing changed size.

Per group of a night: ``detail["sizes"][group] = {"count", "instance_type"}`` on the stop entry
(the sizes recorded at that stop) when present, else the cluster's current snapshot
(``ClusterRecord.snapshot.sizes``). ``detail["outcomes"][group] = "<outcome> <current>/<target>"``
gives what was still running after the stop: ``avoided = recorded - current`` nodes, and the
``current`` nodes that kept running (groups kept, floors, a scale-in that failed) are the protected
cost. A group with no outcome is taken as fully stopped.

Money: ``avoided_cost`` is what the stopped nodes would have billed; ``fsx_residual`` is what the
cluster's FSx for Lustre billed meanwhile; ``net_saving = avoided_cost - fsx_residual``: the GPU
saving with the storage that kept billing set against it (a stopped cluster is not free).
``protected_cost`` is what the nodes still running billed meanwhile. It is reported beside the
saving, never subtracted: those nodes were kept on purpose (scarce capacity, floors, a training
plan) and would have billed the same without the schedule, so they are a saving not taken, not a
loss. A price missing from the table leaves its cost out and names the instance type in
``unpriced``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hyperpod_scheduler.cost.fsx import FileSystem
from hyperpod_scheduler.cost.prices import HOURS_PER_MONTH, PriceTable
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry

SETTLED = ("ok", "failed")
_OUTCOME = re.compile(r"^\s*([a-z]+)\s+(\d+)\s*/\s*(\d+)")


def keep_cost_per_night(instance_type: str, count: int, hours: float, prices: PriceTable) -> float | None:
    """What keeping ``count`` nodes of ``instance_type`` for ``hours`` costs (USD); None if unpriced."""
    if count < 0 or hours < 0:
        raise UsageError(f"keep cost: count {count} and hours {hours} must be 0 or more")
    price = prices.instance(instance_type)
    return None if price is None else price.usd * count * hours


@dataclass(frozen=True)
class GroupNight:
    group: str
    instance_type: str | None
    recorded: int  # nodes before the stop
    running: int  # nodes still running while stopped (kept, floor, failed scale-in)
    outcome: str  # stopped / kept / failed / ... as the engine recorded it


@dataclass(frozen=True)
class Night:
    key: str
    start: datetime  # clipped to the report window
    end: datetime
    groups: tuple[GroupNight, ...]
    ongoing: bool = False  # still stopped at the end of the window
    sizes_from: str = "stop"  # "stop" (the entry's detail) or "snapshot" (fallback)

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600


@dataclass(frozen=True)
class Shortfall:
    key: str
    at: datetime
    group: str
    outcome: str  # partial / failed
    current: int
    target: int
    instance_type: str | None = None


@dataclass
class Totals:
    nights: int = 0
    stopped_hours: float = 0.0
    avoided_node_hours: float = 0.0
    avoided_cost: float = 0.0
    fsx_residual: float = 0.0
    protected_node_hours: float = 0.0
    protected_cost: float = 0.0
    shortfall_nodes: int = 0

    @property
    def net_saving(self) -> float:
        return self.avoided_cost - self.fsx_residual

    def add(self, other: Totals) -> None:
        for name in (
            "nights",
            "stopped_hours",
            "avoided_node_hours",
            "avoided_cost",
            "fsx_residual",
            "protected_node_hours",
            "protected_cost",
            "shortfall_nodes",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def scaled(self, factor: float) -> dict[str, float]:
        """Money and hours times ``factor`` (per night: 1/nights; per month: 730h / window hours)."""
        return {
            "stopped_hours": self.stopped_hours * factor,
            "avoided_node_hours": self.avoided_node_hours * factor,
            "avoided_cost": self.avoided_cost * factor,
            "fsx_residual": self.fsx_residual * factor,
            "protected_cost": self.protected_cost * factor,
            "net_saving": self.net_saving * factor,
        }


@dataclass
class ClusterCost:
    key: str
    nights: list[Night] = field(default_factory=list)
    shortfalls: list[Shortfall] = field(default_factory=list)
    file_systems: list[FileSystem] = field(default_factory=list)
    totals: Totals = field(default_factory=Totals)
    unpriced: set[str] = field(default_factory=set)
    fsx_hourly: float = 0.0  # what the priced file systems bill per hour, stopped or not

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]


@dataclass
class Report:
    since: datetime
    until: datetime
    clusters: list[ClusterCost]
    total: Totals
    price_sources: tuple[str, ...]
    notes: list[str] = field(default_factory=list)

    @property
    def window_hours(self) -> float:
        return (self.until - self.since).total_seconds() / 3600

    def per_night(self, totals: Totals) -> dict[str, float]:
        return totals.scaled(1 / totals.nights if totals.nights else 0.0)

    def per_month(self, totals: Totals) -> dict[str, float]:
        return totals.scaled(HOURS_PER_MONTH / self.window_hours if self.window_hours else 0.0)


def parse_outcome(text: Any) -> tuple[str, int, int] | None:
    """``"partial 2/4"`` -> ``("partial", 2, 4)``; None for anything else."""
    m = _OUTCOME.match(str(text))
    return (m.group(1), int(m.group(2)), int(m.group(3))) if m else None


def _sizes(entry: HistoryEntry, record: ClusterRecord | None) -> tuple[dict[str, tuple[int, str | None]], str]:
    raw = entry.detail.get("sizes")
    if isinstance(raw, Mapping) and raw:
        out: dict[str, tuple[int, str | None]] = {}
        for group, size in raw.items():
            if isinstance(size, Mapping) and isinstance(size.get("count"), int):
                itype = size.get("instance_type")
                out[str(group)] = (size["count"], str(itype) if itype else None)
        if out:
            return out, "stop"
    if record is not None and record.snapshot is not None:
        return {g: (s.count, s.instance_type) for g, s in record.snapshot.sizes.items()}, "snapshot"
    return {}, "none"


def _groups(entry: HistoryEntry, record: ClusterRecord | None) -> tuple[tuple[GroupNight, ...], str]:
    sizes, sizes_from = _sizes(entry, record)
    raw = entry.detail.get("outcomes")
    outcomes = {str(g): parse_outcome(o) for g, o in raw.items()} if isinstance(raw, Mapping) else {}
    groups: list[GroupNight] = []
    for name in [*sizes, *(g for g in outcomes if g not in sizes)]:
        recorded, itype = sizes.get(name, (0, None))
        parsed = outcomes.get(name)
        kind, running = (parsed[0], parsed[1]) if parsed else ("stopped", 0)
        if name not in sizes:
            recorded = running  # only known from the outcome: nothing avoided, its nodes kept running
        groups.append(GroupNight(name, itype, max(recorded, running), running, kind))
    return tuple(groups), sizes_from


def _start_sent(entry: HistoryEntry) -> datetime:
    return entry.at - timedelta(seconds=entry.duration_s or 0)


def nights_and_shortfalls(
    entries: Iterable[HistoryEntry],
    records: Mapping[str, ClusterRecord | None],
    since: datetime,
    until: datetime,
) -> tuple[dict[str, list[Night]], dict[str, list[Shortfall]]]:
    """Stopped intervals per key (see the module doc for the rules) and shortfalls at start."""
    by_key: dict[str, list[HistoryEntry]] = {}
    for e in entries:
        if e.action in ("stop", "start") and e.outcome in SETTLED:
            by_key.setdefault(e.key, []).append(e)
    nights: dict[str, list[Night]] = {}
    shortfalls: dict[str, list[Shortfall]] = {}
    for key, log in by_key.items():
        log.sort(key=lambda e: e.at)
        record = records.get(key)
        open_stop: HistoryEntry | None = None
        found: list[Night | None] = []
        for e in log:
            if e.action == "stop":
                if open_stop is not None:
                    found.append(_night(open_stop, e.at, False, record, since, until))
                open_stop = e
                continue
            if open_stop is not None:
                found.append(_night(open_stop, _start_sent(e), False, record, since, until))
                open_stop = None
            if since <= e.at < until:
                shortfalls.setdefault(key, []).extend(_shortfalls(e, record))
        if open_stop is not None:
            found.append(_night(open_stop, until, True, record, since, until))
        kept = [n for n in found if n is not None]
        if kept:
            nights[key] = kept
    return nights, shortfalls


def _night(
    stop: HistoryEntry, end: datetime, ongoing: bool, record: ClusterRecord | None, since: datetime, until: datetime
) -> Night | None:
    """The stopped interval opened by ``stop`` and ending at ``end``, clipped to the window (None if outside)."""
    groups, sizes_from = _groups(stop, record)
    lo, hi = max(stop.at, since), min(max(end, stop.at), until)
    return Night(stop.key, lo, hi, groups, ongoing, sizes_from) if hi > lo else None


def _shortfalls(entry: HistoryEntry, record: ClusterRecord | None) -> list[Shortfall]:
    raw = entry.detail.get("outcomes")
    if not isinstance(raw, Mapping):
        return []
    types = {g: s.instance_type for g, s in record.snapshot.sizes.items()} if record and record.snapshot else {}
    out: list[Shortfall] = []
    for group, text in raw.items():
        parsed = parse_outcome(text)
        if parsed and parsed[0] in ("partial", "failed") and parsed[1] < parsed[2]:
            out.append(Shortfall(entry.key, entry.at, str(group), parsed[0], parsed[1], parsed[2], types.get(group)))
    return out


def cost_of(
    key: str,
    nights: Sequence[Night],
    shortfalls: Sequence[Shortfall],
    file_systems: Sequence[FileSystem],
    prices: PriceTable,
) -> ClusterCost:
    """One cluster's totals over its nights."""
    cost = ClusterCost(key, list(nights), list(shortfalls), list(file_systems))
    t = cost.totals
    fsx_hourly = 0.0
    for fs in file_systems:
        hourly = fs.hourly(prices)
        if hourly is None:
            cost.unpriced.add(f"{fs.id} ({fs.deployment_type or 'not Lustre'})")
        else:
            fsx_hourly += hourly
    cost.fsx_hourly = fsx_hourly
    for night in nights:
        hours = night.hours
        t.nights += 1
        t.stopped_hours += hours
        t.fsx_residual += fsx_hourly * hours
        for g in night.groups:
            avoided = max(g.recorded - g.running, 0)
            t.avoided_node_hours += avoided * hours
            t.protected_node_hours += g.running * hours
            price = prices.instance(g.instance_type) if g.instance_type else None
            if price is None:
                if avoided or g.running:
                    cost.unpriced.add(g.instance_type or f"group '{g.group}' (instance type unknown)")
                continue
            t.avoided_cost += price.usd * avoided * hours
            t.protected_cost += price.usd * g.running * hours
    t.shortfall_nodes = sum(s.target - s.current for s in shortfalls)
    return cost


def build_report(
    entries: Iterable[HistoryEntry],
    records: Mapping[str, ClusterRecord | None],
    file_systems: Mapping[str, Sequence[FileSystem]],
    prices: PriceTable,
    since: datetime,
    until: datetime,
    notes: Sequence[str] = (),
) -> Report:
    """The whole report: every key with a night, a shortfall or known file systems, and the total."""
    if until <= since:
        raise UsageError(f"report window: --until {until.isoformat()} must be after --since {since.isoformat()}")
    nights, shortfalls = nights_and_shortfalls(entries, records, since, until)
    keys = sorted(set(nights) | set(shortfalls) | {k for k, v in file_systems.items() if v})
    clusters = [cost_of(k, nights.get(k, []), shortfalls.get(k, []), file_systems.get(k, []), prices) for k in keys]
    total = Totals()
    for c in clusters:
        total.add(c.totals)
    return Report(since, until, clusters, total, prices.sources, list(notes))


__all__ = [
    "ClusterCost",
    "GroupNight",
    "Night",
    "Report",
    "Shortfall",
    "Totals",
    "build_report",
    "cost_of",
    "keep_cost_per_night",
    "nights_and_shortfalls",
    "parse_outcome",
]
