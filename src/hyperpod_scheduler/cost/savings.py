"""Savings maths: pure functions from the action history to nights, hours and dollars.

What is read (and nothing else):

- A ``stop`` line with outcome ``ok`` or ``failed`` (a stop that settled, fully or not) opens a
  *night* at its ``at`` (when the scale-in settled: nodes still terminating are not counted as saved).
  A ``stop`` line with outcome ``noop`` that carries group outcomes (every group was protected, so
  nothing was sent) opens a night too: nothing is saved in it, and what kept running is shown.
- The next ``start`` line of the same key closes the night: a settled one (``ok``/``failed``) at
  ``at - duration_s``, when the start was sent (nodes bill again from launch), a ``noop`` one at its
  ``at``. A settled start's group outcomes give the shortfalls. A stop followed by another stop closes
  the first night there; a night still open at ``until`` counts up to ``until``. Nights are clipped to
  ``[since, until)``.
- Other ``noop`` and ``refused`` lines, holds and releases are ignored: nothing changed size.

Per group of a night: the sizes recorded at that stop (``detail["sizes"]``), else the cluster's current
snapshot; the group's outcome (``detail["outcomes"]``, typed, see ``store.outcomes``) says how many
nodes were still running. ``recorded - running`` nodes were avoided; the ``running`` ones (kept on
purpose, a floor, a scale-in that failed) are *kept*. A group with no outcome is taken as fully stopped.

Money, all in USD and none netted against another:

- ``saving``: what the avoided nodes would have billed. That is the saving, nothing subtracted.
- ``fsx_while_stopped``: what the cluster's FSx billed meanwhile. It bills the same whether or not
  the cluster is stopped, so it is not a cost of the schedule: it is quoted beside the saving.
- ``kept_cost``: what the kept nodes billed meanwhile: a saving not taken, also beside, never subtracted.

Periods: ``window`` (the report's window), ``per_night`` (the window divided by the cluster's nights)
and ``per_month``: the figures per stopped hour observed in the window, times the stopped hours of the
cluster's schedule in the 730 hours from the window's end (``cost.rates.money``, the one per-month
formula of every face), so the range picked does not change it. A cluster no schedule governs has no
stopped month of its own: its window is projected to a 730-hour month by its share of the window
(``× 730 / window hours``). The fleet total of every period is the sum of the clusters' figures for
that period, so each TOTAL row adds up the rows above it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_scheduler.cost.fsx import FileSystem
from hyperpod_scheduler.cost.prices import Price, PriceTable
from hyperpod_scheduler.cost.rates import HOURS_PER_MONTH, money
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store.outcomes import read_outcomes
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry

if TYPE_CHECKING:
    from hyperpod_scheduler.schedule import Schedule

SETTLED = ("ok", "failed")
PERIODS = ("window", "per_night", "per_month")


def keep_cost_per_night(
    instance_type: str, count: int, schedule: Schedule | None, now: datetime, prices: PriceTable
) -> float | None:
    """What keeping ``count`` nodes of ``instance_type`` costs over the schedule's night (``cost.rates``:
    the night in progress or the next one, whole); None if unpriced or no night."""
    if count < 0:
        raise UsageError(f"keep cost: count {count} must be 0 or more")
    price = prices.instance(instance_type)
    return None if price is None else money(price.usd * count, schedule, now).per_night


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
    sizes_from: str = "stop"  # "stop" (the line's detail) or "snapshot" (fallback)

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


@dataclass(frozen=True)
class Figures:
    """One period's figures for one cluster or the fleet (hours and USD)."""

    stopped_hours: float = 0.0
    avoided_node_hours: float = 0.0
    saving: float = 0.0  # instance cost avoided
    fsx_while_stopped: float = 0.0  # FSx billed over the stopped hours (it bills anyway)
    kept_node_hours: float = 0.0
    kept_cost: float = 0.0  # nodes that kept running while stopped (not saved)

    def __add__(self, other: Figures) -> Figures:
        return Figures(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def scaled(self, factor: float) -> Figures:
        return Figures(*(getattr(self, f.name) * factor for f in fields(self)))


@dataclass(frozen=True)
class NightCost:
    night: Night
    figures: Figures


@dataclass(frozen=True)
class Periods:
    window: Figures = Figures()
    per_night: Figures = Figures()
    per_month: Figures = Figures()

    def __add__(self, other: Periods) -> Periods:
        return Periods(self.window + other.window, self.per_night + other.per_night, self.per_month + other.per_month)

    def get(self, period: str) -> Figures:
        if period not in PERIODS:
            raise KeyError(period)
        figures: Figures = getattr(self, period)
        return figures


@dataclass
class ClusterCost:
    key: str
    nights: list[NightCost] = field(default_factory=list)
    shortfalls: list[Shortfall] = field(default_factory=list)
    file_systems: list[FileSystem] = field(default_factory=list)
    periods: Periods = Periods()
    unpriced: set[str] = field(default_factory=set)
    fsx_hourly: float = 0.0  # what the priced file systems bill per hour, stopped or not
    prices_used: dict[str, Price] = field(default_factory=dict)
    fsx_per_month: float = 0.0  # what they bill in a whole 730-hour month (cost.rates.money)
    per_month_from: str = "window"  # "schedule" (its stopped month) or "window" (no schedule: its share)

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def night_count(self) -> int:
        return len(self.nights)

    @property
    def shortfall_nodes(self) -> int:
        return sum(s.target - s.current for s in self.shortfalls)

    @property
    def released_anything(self) -> bool:
        """Whether any night of the window left nodes off (a stop that kept everything released nothing)."""
        return any(n.figures.avoided_node_hours > 0 for n in self.nights)


@dataclass(frozen=True)
class ReservedIdle:
    """Reserved training-plan capacity that was paid for and ran idle in the window (not a saving:
    reserved hours bill whether or not they run)."""

    key: str
    plan: str
    instance_type: str | None
    idle_instance_hours: float
    cost: float | None  # the plan's upfront fee per reserved instance-hour times the idle hours
    currency: str | None


@dataclass
class Report:
    since: datetime
    until: datetime
    clusters: list[ClusterCost]
    total: Periods
    price_sources: tuple[str, ...]
    notes: list[str] = field(default_factory=list)
    reserved_idle: list[ReservedIdle] = field(default_factory=list)

    @property
    def window_hours(self) -> float:
        return (self.until - self.since).total_seconds() / 3600

    @property
    def nights(self) -> int:
        return sum(c.night_count for c in self.clusters)

    @property
    def shortfall_nodes(self) -> int:
        return sum(c.shortfall_nodes for c in self.clusters)

    @property
    def prices_used(self) -> dict[str, Price]:
        """Every price a figure of the report used, by what it prices (for naming each one's source)."""
        out: dict[str, Price] = {}
        for c in self.clusters:
            out.update(c.prices_used)
        return dict(sorted(out.items()))


def _sizes(entry: HistoryEntry, record: ClusterRecord | None) -> tuple[dict[str, tuple[int, str | None]], str]:
    raw = entry.detail.get("sizes")
    if isinstance(raw, Mapping) and raw:
        out: dict[str, tuple[int, str | None]] = {}
        for group, size in raw.items():
            count = size.get("count") if isinstance(size, Mapping) else None
            if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                itype = size.get("instance_type")
                out[str(group)] = (count, str(itype) if itype else None)
        if out:
            return out, "stop"
    if record is not None and record.snapshot is not None:
        return {g: (s.count, s.instance_type) for g, s in record.snapshot.sizes.items()}, "snapshot"
    return {}, "none"


def _groups(entry: HistoryEntry, record: ClusterRecord | None) -> tuple[tuple[GroupNight, ...], str]:
    sizes, sizes_from = _sizes(entry, record)
    outcomes = read_outcomes(entry.detail)
    groups: list[GroupNight] = []
    for name in [*sizes, *(g for g in outcomes if g not in sizes)]:
        recorded, itype = sizes.get(name, (0, None))
        o = outcomes.get(name)
        kind, running = (o.outcome, o.current) if o is not None else ("stopped", 0)
        if name not in sizes:
            recorded = running  # only known from the outcome: nothing avoided, its nodes kept running
        groups.append(GroupNight(name, itype, max(recorded, running), running, kind))
    return tuple(groups), sizes_from


def _opens_night(e: HistoryEntry) -> bool:
    return e.action == "stop" and (e.outcome in SETTLED or (e.outcome == "noop" and bool(read_outcomes(e.detail))))


def _closes_night(e: HistoryEntry) -> bool:
    return e.action == "start" and e.outcome in (*SETTLED, "noop")


def _start_sent(entry: HistoryEntry) -> datetime:
    if entry.outcome == "noop":
        return entry.at
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
        if _opens_night(e) or _closes_night(e):
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
            short = _shortfalls(e, record) if e.outcome in SETTLED and since <= e.at < until else []
            if short:
                shortfalls.setdefault(key, []).extend(short)
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
    types = {g: s.instance_type for g, s in record.snapshot.sizes.items()} if record and record.snapshot else {}
    return [
        Shortfall(entry.key, entry.at, group, o.outcome, o.current, o.target, types.get(group))
        for group, o in read_outcomes(entry.detail).items()
        if o.outcome in ("partial", "failed") and o.current < o.target
    ]


def _night_figures(night: Night, fsx_hourly: float, prices: PriceTable, cost: ClusterCost) -> Figures:
    hours = night.hours
    avoided_h = kept_h = saving = kept_cost = 0.0
    for g in night.groups:
        avoided = max(g.recorded - g.running, 0)
        avoided_h += avoided * hours
        kept_h += g.running * hours
        price = prices.instance(g.instance_type) if g.instance_type else None
        if price is None:
            if avoided or g.running:
                cost.unpriced.add(g.instance_type or f"group '{g.group}' (instance type unknown)")
            continue
        if avoided or g.running:
            cost.prices_used[f"instance_hourly {g.instance_type}"] = price
        saving += price.usd * avoided * hours
        kept_cost += price.usd * g.running * hours
    return Figures(hours, avoided_h, saving, fsx_hourly * hours, kept_h, kept_cost)


def cost_of(
    key: str,
    nights: Sequence[Night],
    shortfalls: Sequence[Shortfall],
    file_systems: Sequence[FileSystem],
    prices: PriceTable,
    window_hours: float,
    schedule: Schedule | None = None,
    until: datetime | None = None,
) -> ClusterCost:
    """One cluster's figures over its nights, per window, night and month (``schedule``: the one that
    governs the cluster, whose stopped hours from ``until`` make its month)."""
    cost = ClusterCost(key, shortfalls=list(shortfalls), file_systems=list(file_systems))
    for fs in file_systems:
        priced = fs.priced(prices)
        if priced is None:
            cost.unpriced.add(f"{fs.id} ({fs.label})")
            continue
        cost.fsx_hourly += priced[0]
        cost.prices_used.update(priced[1])
    cost.nights = [NightCost(n, _night_figures(n, cost.fsx_hourly, prices, cost)) for n in nights]
    window = sum((n.figures for n in cost.nights), Figures())
    per_night = window.scaled(1 / len(cost.nights)) if cost.nights else Figures()
    month = money(cost.fsx_hourly, schedule, until) if until is not None else money(cost.fsx_hourly, None, datetime.min)
    cost.fsx_per_month = month.month_always or 0.0
    factor = month.scale_to_month(window.stopped_hours)
    if factor is not None:
        cost.per_month_from = "schedule"
    elif window_hours > 0:
        factor = HOURS_PER_MONTH / window_hours
    cost.periods = Periods(window, per_night, window.scaled(factor) if factor else Figures())
    return cost


def build_report(
    entries: Iterable[HistoryEntry],
    records: Mapping[str, ClusterRecord | None],
    file_systems: Mapping[str, Sequence[FileSystem]],
    prices: PriceTable,
    since: datetime,
    until: datetime,
    notes: Sequence[str] = (),
    schedules: Mapping[str, Schedule] | None = None,
) -> Report:
    """The whole report: every key with a night, a shortfall or known file systems, and the fleet total.
    ``schedules``: by key, the schedule that governs each cluster (its month; see the module doc)."""
    if until <= since:
        raise UsageError(f"report window: --until {until.isoformat()} must be after --since {since.isoformat()}")
    nights, shortfalls = nights_and_shortfalls(entries, records, since, until)
    keys = sorted(set(nights) | set(shortfalls) | {k for k, v in file_systems.items() if v})
    hours = (until - since).total_seconds() / 3600
    clusters = [
        cost_of(
            k,
            nights.get(k, []),
            shortfalls.get(k, []),
            file_systems.get(k, []),
            prices,
            hours,
            (schedules or {}).get(k),
            until,
        )
        for k in keys
    ]
    total = sum((c.periods for c in clusters), Periods())
    return Report(since, until, clusters, total, prices.sources, list(notes))


def nightly(report: Report) -> list[tuple[str, Figures]]:
    """The fleet's figures per night, by the UTC date the night began (for charts), oldest first."""
    out: dict[str, Figures] = {}
    for c in report.clusters:
        for n in c.nights:
            day = f"{n.night.start:%Y-%m-%d}"
            out[day] = out.get(day, Figures()) + n.figures
    return sorted(out.items())


__all__ = [
    "PERIODS",
    "ClusterCost",
    "Figures",
    "GroupNight",
    "Night",
    "NightCost",
    "Periods",
    "Report",
    "Shortfall",
    "build_report",
    "cost_of",
    "keep_cost_per_night",
    "nightly",
    "nights_and_shortfalls",
]
