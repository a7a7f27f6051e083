"""The savings report every face shows, computed once: ``report`` (table, JSON, CSV), the dashboard's
savings page and API, and ``report --html`` all call ``build`` and print what it returns.

The shell around the pure ``cost`` maths: read the history and records from the store, find each
cluster's FSx file systems through AWS (or take them from the caller), resolve prices from the
config's ``cost:`` section, then hand everything to ``cost.savings.build_report``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.cost import fsx, pricelist, sources
from hyperpod_scheduler.cost.fsx import FileSystem
from hyperpod_scheduler.cost.prices import PriceTable
from hyperpod_scheduler.cost.savings import Report, ReservedIdle, build_report
from hyperpod_scheduler.cost.settings import CostSettings, PriceSettings
from hyperpod_scheduler.engine import plans
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import bounded, files
from hyperpod_scheduler.store.errors import CorruptRecordError
from hyperpod_scheduler.store.records import ClusterRecord

if TYPE_CHECKING:
    from hyperpod_scheduler.schedule import Schedule
    from hyperpod_scheduler.store.base import StateStore

DEFAULT_WINDOW = timedelta(days=30)
FSX_CACHE_S = 300.0
# (cluster keys, notes to append to) -> file systems by key
FileSystemSource = Callable[[Sequence[str], list[str]], Mapping[str, Sequence[FileSystem]]]
# (region, profile) -> a SageMaker client (the face's own: the CLI's, the dashboard's, the emulator's)
SageMakerFor = Callable[[str | None, str | None], Any]


def cost_settings(config: Config | Any) -> CostSettings:
    """The config's ``cost:`` section, typed (a raw mapping is checked, one line naming the field)."""
    raw = getattr(config, "cost", None)
    if raw is None or isinstance(raw, CostSettings):
        return raw or CostSettings()
    try:
        return CostSettings.model_validate(raw if isinstance(raw, Mapping) else raw.model_dump())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"config cost.{where}: {first['msg']}") from None


def window(
    now: datetime,
    since: datetime | None,
    until: datetime | None,
    notes: list[str] | None = None,
    names: tuple[str, str] = ("--since", "--until"),
) -> tuple[datetime, datetime]:
    """The report window: ``until`` defaults to now, ``since`` to 30 days before ``until``. Nothing after
    ``now`` has happened: an ``until`` later than now ends the window now, said in ``notes`` (a month asked
    for while it runs, "this month"); counted on, the clusters stopped now would be stopped until then, a
    saving made up and shown as made. A ``since`` later than now is refused. ``names``: the face's own
    names for the two (options on the command line, query fields on the dashboard)."""
    if since is not None and since >= now:
        raise UsageError(f"{names[0]} {since.isoformat()} is not before now ({now.isoformat()}): nothing to count yet")
    end = until or now
    if end > now:
        if notes is not None:
            notes.append(f"{names[1]} {end.isoformat()} is later than now: counted up to now ({now.isoformat()})")
        end = now
    start = since or end - DEFAULT_WINDOW
    if end <= start:
        raise UsageError(f"{names[1]} {end.isoformat()} must be after {names[0]} {start.isoformat()}")
    return start, end


def _record_or_said(store: StateStore, key: str, said: list[str]) -> ClusterRecord | None:
    """The record of ``key``; a damaged one is said in the notes and counted from its history alone (one
    damaged row never hides the rest of the fleet's savings)."""
    try:
        return store.get(key)
    except CorruptRecordError as exc:
        said.append(f"{exc}: its nights are counted from the history alone")
        return None


def split_key(key: str) -> tuple[str | None, str]:
    """``account/region/name`` -> (region, name); a bare name has no region."""
    parts = key.split("/")
    return (parts[-2], parts[-1]) if len(parts) >= 3 else (None, parts[-1])


def profile_for(config: Config | Any, region: str | None) -> str | None:
    for target in getattr(config, "targets", None) or []:
        if target.region == region and target.profile:
            return str(target.profile)
    return None


def prices(settings: PriceSettings, now: datetime, aws: AwsClients, notes: list[str] | None = None) -> PriceTable:
    """Bundled, then the Price List API when enabled, then the override file: the one price source."""
    return sources.resolve(settings, now, lambda: aws.client("pricing", region=pricelist.PRICING_REGION), notes)


# Clusters described at once for FSx discovery (issue 30: 1,000 clusters at 20 ms a call in about a
# second, not 20 s one after another); below the clients' connection pool (10), so no call waits for one.
DISCOVERY_CONCURRENCY = 8


@dataclass
class FileSystemFinder:
    """FSx discovery through AWS for a set of cluster keys: one shared refresh. One DescribeFileSystems
    listing per region serves every cluster there; the clusters' DescribeCluster (and S3) reads run
    ``concurrency`` at a time; an AWS failure becomes a note and an uncounted figure, never an abort.
    With ``cache_s`` a recent answer for the same keys is reused (the dashboard renders often), and the
    notes say how old it is."""

    config: Config | Any
    sagemaker_for: SageMakerFor
    aws: AwsClients = field(default_factory=AwsClients)
    cache_s: float = 0.0
    clock: Callable[[], float] = time.monotonic
    cache: dict[tuple[str, ...], tuple[float, dict[str, list[FileSystem]], list[str]]] = field(default_factory=dict)
    concurrency: int = DISCOVERY_CONCURRENCY
    # The last refresh kept on disk too, for the next process (a `report` run again within cache_s).
    saved: SavedRefresh | None = None
    # A DescribeCluster answer already at hand for a cluster key (the dashboard's shared looks, which the
    # engine's own describes keep fresh): used instead of describing that cluster again.
    described: Callable[[str], Mapping[str, Any] | None] | None = None

    def __call__(self, keys: Sequence[str], notes: list[str]) -> dict[str, list[FileSystem]]:
        cached = self.cache.get(tuple(keys))
        if cached is not None and (age := self.clock() - cached[0]) < self.cache_s:
            return _as_found(cached[1], cached[2], age, self.cache_s, notes)
        kept = self.saved.load(keys, self.cache_s) if self.saved is not None and self.cache_s > 0 else None
        if kept is not None:
            age, found, said = kept
            self.cache[tuple(keys)] = (self.clock() - age, found, said)
            return _as_found(found, said, age, self.cache_s, notes)
        said = []
        found = self._find(keys, said)
        if self.cache_s > 0:
            self.cache[tuple(keys)] = (self.clock(), found, said)
            if self.saved is not None:
                self.saved.save(keys, found, said)
        notes.extend(said)
        return found

    def _find(self, keys: Sequence[str], notes: list[str]) -> dict[str, list[FileSystem]]:
        settings = cost_settings(self.config).fsx
        work: list[tuple[str, str | None, str, list[str], str | None]] = []
        for key in keys:
            region, name = split_key(key)
            configured = list(settings.file_systems.get(name, []))
            if configured or settings.discover:
                work.append((key, region, name, configured, profile_for(self.config, region)))
        # Per region, once and before the clusters: the clients (made here, one thread: making them is
        # not thread-safe) and the DescribeFileSystems listing every cluster there shares.
        places: dict[tuple[str | None, str | None], _Place] = {}
        for _, region, _, _, profile in work:
            if (region, profile) not in places:
                places[(region, profile)] = self._place(region, profile, settings.discover, notes)
        lock = threading.Lock()
        reused = [0]

        def one(item: tuple[str, str | None, str, list[str], str | None]) -> tuple[list[FileSystem] | None, list[str]]:
            key, region, name, configured, profile = item
            place = places[(region, profile)]
            said: list[str] = []
            if place.failed is not None:
                return None, [f"{name}: FSx discovery failed ({place.failed}); its FSx is not counted"]
            try:
                cluster, s3 = None, None
                if settings.discover:
                    try:
                        known = self.described(key) if self.described is not None else None
                        if known is not None:
                            with lock:
                                reused[0] += 1
                        cluster = dict(
                            known if known is not None else place.sagemaker.describe_cluster(ClusterName=name)
                        )
                        # Only a cluster with lifecycle scripts has a provisioning_parameters.json to read.
                        if fsx.source_uris(cluster):
                            with lock:
                                s3 = self.aws.client("s3", profile, region)
                    except ClientError as exc:
                        code = exc.response.get("Error", {}).get("Code")
                        said.append(f"{name}: no DescribeCluster answer ({code}); FSx found by config and tag only")
                found = fsx.discover(
                    name,
                    place.fsx,
                    configured=configured,
                    s3=s3,
                    cluster=cluster,
                    by_tag=settings.discover,
                    listing=place.listing,
                )
            except (BotoCoreError, ClientError) as exc:
                said.append(f"{name}: FSx discovery failed ({_one_line(exc)}); its FSx is not counted")
                return None, said
            return found.file_systems, said + found.notes

        if len(work) > 1 and self.concurrency > 1:
            with ThreadPoolExecutor(min(self.concurrency, len(work)), thread_name_prefix="fsx-discovery") as pool:
                answers = list(pool.map(one, work))
        else:
            answers = [one(item) for item in work]
        if reused[0]:
            notes.append(
                f"FSx mounts of {reused[0]} cluster(s) as the scheduler's own last look at them recorded them "
                "(no DescribeCluster of their own)"
            )
        out: dict[str, list[FileSystem]] = {}
        for (key, *_), (systems, said) in zip(work, answers, strict=True):  # in the keys' order, as before
            notes.extend(said)
            if systems is not None:
                out[key] = systems
        return out

    def _place(self, region: str | None, profile: str | None, discover: bool, notes: list[str]) -> _Place:
        try:
            fsx_client = self.aws.client("fsx", profile, region)
            sagemaker = self.sagemaker_for(region, profile) if discover else None
            listing = fsx.list_file_systems(fsx_client, notes=notes) if discover else None
        except (BotoCoreError, ClientError) as exc:
            return _Place(None, None, None, _one_line(exc))
        return _Place(fsx_client, sagemaker, listing, None)


@dataclass(frozen=True)
class _Place:
    """One region and profile's clients and DescribeFileSystems listing, or why they could not be had."""

    fsx: Any
    sagemaker: Any
    listing: list[dict[str, Any]] | None
    failed: str | None


def _as_found(
    found: dict[str, list[FileSystem]], said: list[str], age: float, every: float, notes: list[str]
) -> dict[str, list[FileSystem]]:
    notes.extend(said)
    notes.append(
        f"FSx file systems as found {_age(age)} ago (found again every {_age(every)}): one added or removed "
        "since then is not shown yet"
    )
    return found


@dataclass(frozen=True)
class SavedRefresh:
    """A discovery refresh in a file of the user's own (0600), for the next process within the cache's
    age. ``identity`` is what the answer depends on besides the keys (the FSx settings, the profiles,
    the endpoint): a refresh made for another is never read back. Damaged, foreign or unreadable: not
    used, and found again; one that cannot be written is simply not kept."""

    path: Path
    identity: str
    wall: Callable[[], float] = time.time

    def load(self, keys: Sequence[str], max_age: float) -> tuple[float, dict[str, list[FileSystem]], list[str]] | None:
        try:
            doc = bounded.load_json(bounded.read_bytes(self.path), str(self.path))
            if not isinstance(doc, dict) or doc.get("identity") != self.identity or doc.get("keys") != list(keys):
                return None
            age = self.wall() - float(doc["at"])
            if not 0 <= age < max_age:
                return None
            found = {str(k): [_file_system(f) for f in systems] for k, systems in dict(doc["found"]).items()}
            return age, found, [str(n) for n in doc["notes"]]
        except (UsageError, OSError, KeyError, TypeError, ValueError, AttributeError):
            return None

    def save(self, keys: Sequence[str], found: Mapping[str, Sequence[FileSystem]], notes: Sequence[str]) -> None:
        doc = {
            "identity": self.identity,
            "keys": list(keys),
            "at": self.wall(),
            "found": {k: [dataclasses.asdict(f) for f in v] for k, v in found.items()},
            "notes": list(notes),
        }
        with contextlib.suppress(UsageError, OSError):
            files.write_text(self.path, json.dumps(doc), "FSx cache", mode=0o600, make_folders=True)


def _file_system(raw: Any) -> FileSystem:
    return FileSystem(
        id=str(raw["id"]),
        storage_gib=int(raw["storage_gib"]),
        deployment_type=None if raw["deployment_type"] is None else str(raw["deployment_type"]),
        throughput=None if raw["throughput"] is None else int(raw["throughput"]),
        found_by=tuple(str(h) for h in raw["found_by"]),
        file_system_type=str(raw["file_system_type"]),
    )


@dataclass
class SeenByStops:
    """For ``FileSystemFinder.described``: what the engine kept of a cluster's DescribeCluster answer
    with its last stop (``Snapshot.storage``), or None (never stopped, or stopped before it was kept).
    ``known``: records already read (``build`` hands over the ones it read: not read twice)."""

    store: StateStore
    known: dict[str, ClusterRecord | None] = field(default_factory=dict)

    def __call__(self, key: str) -> Mapping[str, Any] | None:
        record = self.known[key] if key in self.known else _record_or_said(self.store, key, [])
        snapshot = record.snapshot if record is not None else None
        return snapshot.storage if snapshot is not None else None


def seen_by_stops(store: StateStore) -> SeenByStops:
    return SeenByStops(store)


def _age(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def none_found(keys: Sequence[str], notes: list[str]) -> dict[str, list[FileSystem]]:
    """No FSx discovery at all (``--no-fsx``): no AWS call, and the report says so."""
    notes.append("FSx discovery skipped (--no-fsx): FSx still billing while stopped is not counted")
    return {}


def schedules_for(config: Config | Any, keys: Sequence[str]) -> dict[str, Schedule]:
    """By key, the schedule of each cluster the config names (``targets[].clusters[]``; the cluster's,
    its target's or the defaults' schedule), for the report's per-month figures. Read from the config
    alone (the report does no discovery): a tag-selected cluster, or one the config no longer names,
    has none, and its month is its share of the window. A name in two regions matches by region."""
    from hyperpod_scheduler.schedule import load_schedules, resolve

    named: dict[tuple[str | None, str], str] = {}
    default = getattr(getattr(config, "defaults", None), "schedule", None)
    for target in getattr(config, "targets", None) or []:
        for entry in target.clusters or []:
            label = entry.schedule or target.schedule or default
            if label:
                named.setdefault((target.region, entry.name), label)
    if not named:
        return {}
    try:
        table = load_schedules(getattr(config, "schedules", None) or {})
    except UsageError:
        return {}  # the config's own commands say what is wrong with it; the report goes on without months
    out: dict[str, Schedule] = {}
    for key in keys:
        region, name = split_key(key)
        label = named.get((region, name)) or named.get((None, name))
        if label is None:
            continue
        with contextlib.suppress(UsageError):
            out[key] = resolve(label, table)
    return out


def build(
    store: StateStore,
    table: PriceTable,
    file_systems: FileSystemSource,
    since: datetime,
    until: datetime,
    notes: Sequence[str] = (),
    config: Config | Any = None,
) -> Report:
    """The report over ``[since, until)``: every cluster with a night, a shortfall or a file system.
    ``config``: where the clusters' schedules come from (``schedules_for``: their per-month figures,
    ``cost.rates``); every face passes its config, so a month is one figure everywhere."""
    if until <= since:
        raise UsageError(f"--until {until.isoformat()} must be after --since {since.isoformat()}")
    # From the beginning: a night that began before ``since`` still counts from ``since`` on.
    damaged: list[str] = []
    entries = store.history_all(None, until, damaged=damaged)
    keys = sorted({e.key for e in entries if e.action in ("stop", "start")})
    said = list(notes)
    said += [f"{line}: left out of the figures" for line in damaged[:5]]  # one damaged line hides no cluster
    if len(damaged) > 5:
        said.append(f"{len(damaged) - 5} more history entries are unreadable and left out of the figures")
    records = {k: _record_or_said(store, k, said) for k in keys}
    seen = getattr(file_systems, "described", None)
    if isinstance(seen, SeenByStops) and seen.store is store:
        seen.known.update(records)  # FSx discovery reads these same records' snapshots
    systems = file_systems(keys, said)
    governing = schedules_for(config, keys) if config is not None else {}
    report = build_report(entries, records, systems, table, since, until, said, governing)
    # Beside the saving: reserved hours paid for and not used (clusters with a watched training plan).
    planned = sorted({e.key for e in entries if e.action == "plan"})
    report.reserved_idle = reserved_idle(
        {k: records[k] if k in records else _record_or_said(store, k, said) for k in planned}, since, until
    )
    return report


def reserved_idle(records: Mapping[str, ClusterRecord | None], since: datetime, until: datetime) -> list[ReservedIdle]:
    out: list[ReservedIdle] = []
    for key, record in records.items():
        for watch in (record.plans if record else {}).values():
            hours = plans.idle_hours(watch, since, until)
            if hours <= 0:
                continue
            rate = plans.hourly_rate(watch)
            out.append(
                ReservedIdle(
                    key=key,
                    plan=plans.plan_name(watch.arn),
                    instance_type=watch.instance_type,
                    idle_instance_hours=hours,
                    cost=None if rate is None else rate * hours,
                    currency=watch.currency,
                )
            )
    return out


__all__ = [
    "DEFAULT_WINDOW",
    "DISCOVERY_CONCURRENCY",
    "FSX_CACHE_S",
    "FileSystemFinder",
    "FileSystemSource",
    "SavedRefresh",
    "SeenByStops",
    "build",
    "cost_settings",
    "none_found",
    "prices",
    "profile_for",
    "schedules_for",
    "seen_by_stops",
    "split_key",
    "window",
]
