"""The savings report every face shows, computed once: ``report`` (table, JSON, CSV), the dashboard's
savings page and API, and ``report --html`` all call ``build`` and print what it returns.

The shell around the pure ``cost`` maths: read the history and records from the store, find each
cluster's FSx file systems through AWS (or take them from the caller), resolve prices from the
config's ``cost:`` section, then hand everything to ``cost.savings.build_report``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
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
from hyperpod_scheduler.store.records import ClusterRecord

if TYPE_CHECKING:
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


def window(now: datetime, since: datetime | None, until: datetime | None) -> tuple[datetime, datetime]:
    """The report window: ``until`` defaults to now, ``since`` to 30 days before ``until``."""
    end = until or now
    start = since or end - DEFAULT_WINDOW
    if end <= start:
        raise UsageError(f"--until {end.isoformat()} must be after --since {start.isoformat()}")
    return start, end


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


@dataclass
class FileSystemFinder:
    """FSx discovery through AWS for a set of cluster keys. One DescribeFileSystems listing per region
    serves every cluster there; an AWS failure becomes a note and an uncounted figure, never an abort.
    With ``cache_s`` a recent answer for the same keys is reused (the dashboard renders often)."""

    config: Config | Any
    sagemaker_for: SageMakerFor
    aws: AwsClients = field(default_factory=AwsClients)
    cache_s: float = 0.0
    clock: Callable[[], float] = time.monotonic
    cache: dict[tuple[str, ...], tuple[float, dict[str, list[FileSystem]], list[str]]] = field(default_factory=dict)

    def __call__(self, keys: Sequence[str], notes: list[str]) -> dict[str, list[FileSystem]]:
        cached = self.cache.get(tuple(keys))
        if cached is not None and self.clock() - cached[0] < self.cache_s:
            notes.extend(cached[2])
            return cached[1]
        said: list[str] = []
        found = self._find(keys, said)
        if self.cache_s > 0:
            self.cache[tuple(keys)] = (self.clock(), found, said)
        notes.extend(said)
        return found

    def _find(self, keys: Sequence[str], notes: list[str]) -> dict[str, list[FileSystem]]:
        settings = cost_settings(self.config).fsx
        listings: dict[tuple[str | None, str | None], list[dict[str, Any]] | None] = {}
        out: dict[str, list[FileSystem]] = {}
        for key in keys:
            region, name = split_key(key)
            configured = settings.file_systems.get(name, [])
            if not configured and not settings.discover:
                continue
            profile = profile_for(self.config, region)
            try:
                fsx_client = self.aws.client("fsx", profile, region)
                if (region, profile) not in listings:
                    listings[(region, profile)] = (
                        fsx.list_file_systems(fsx_client, notes=notes) if settings.discover else None
                    )
                cluster, s3 = None, None
                if settings.discover:
                    try:
                        cluster = dict(self.sagemaker_for(region, profile).describe_cluster(ClusterName=name))
                        # Only a cluster with lifecycle scripts has a provisioning_parameters.json to read.
                        s3 = self.aws.client("s3", profile, region) if fsx.source_uris(cluster) else None
                    except ClientError as exc:
                        code = exc.response.get("Error", {}).get("Code")
                        notes.append(f"{name}: no DescribeCluster answer ({code}); FSx found by config and tag only")
                found = fsx.discover(
                    name,
                    fsx_client,
                    configured=configured,
                    s3=s3,
                    cluster=cluster,
                    by_tag=settings.discover,
                    listing=listings[(region, profile)],
                )
            except (BotoCoreError, ClientError) as exc:
                notes.append(f"{name}: FSx discovery failed ({_one_line(exc)}); its FSx is not counted")
                continue
            notes.extend(found.notes)
            out[key] = found.file_systems
        return out


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def none_found(keys: Sequence[str], notes: list[str]) -> dict[str, list[FileSystem]]:
    """No FSx discovery at all (``--no-fsx``): no AWS call, and the report says so."""
    notes.append("FSx discovery skipped (--no-fsx): FSx still billing while stopped is not counted")
    return {}


def build(
    store: StateStore,
    table: PriceTable,
    file_systems: FileSystemSource,
    since: datetime,
    until: datetime,
    notes: Sequence[str] = (),
) -> Report:
    """The report over ``[since, until)``: every cluster with a night, a shortfall or a file system."""
    if until <= since:
        raise UsageError(f"--until {until.isoformat()} must be after --since {since.isoformat()}")
    # From the beginning: a night that began before ``since`` still counts from ``since`` on.
    entries = store.history_all(None, until)
    keys = sorted({e.key for e in entries if e.action in ("stop", "start")})
    records = {k: store.get(k) for k in keys}
    said = list(notes)
    systems = file_systems(keys, said)
    report = build_report(entries, records, systems, table, since, until, said)
    # Beside the saving: reserved hours paid for and not used (clusters with a watched training plan).
    planned = sorted({e.key for e in entries if e.action == "plan"})
    report.reserved_idle = reserved_idle({k: records.get(k) or store.get(k) for k in planned}, since, until)
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
    "FSX_CACHE_S",
    "FileSystemFinder",
    "FileSystemSource",
    "build",
    "cost_settings",
    "none_found",
    "prices",
    "profile_for",
    "split_key",
    "window",
]
