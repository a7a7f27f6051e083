"""The orchestrator's fan-out messages: self-contained jobs, one or more per (account, region) target.

A job carries the part of the config its worker needs and nothing else: its own clusters, the schedules
they name (all of them when it discovers clusters by tag, since a tag may name any), the defaults and
notifications. So a worker needs no second read of the fleet config, every worker of one tick sees the
same config, and a fleet with many schedules does not put all of them into every message.

A target naming more than ``hub.clusters_per_message`` clusters is split across messages, and its tag
discovery across ``tag_shards`` messages (by a stable hash of the cluster name); the parts of one
target share its SageMaker rate, since they may run at the same moment. Every body is checked against
SQS's size limit as it will be sent (UTF-8 bytes of the encoded JSON); a part too large is split
further, and a single cluster that still does not fit is reported, never sent.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from hyperpod_scheduler.config.model import ClusterEntry, Config, Target
from hyperpod_scheduler.deploy.fleet_config import ACCOUNT_PATTERN, FleetConfig, FleetTarget, SagemakerRates
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import bounded

# 3: jobs carry the config version they were built from. A message of another format is dropped,
# its claim released (``claim_of`` reads the few fields every format has), so the next tick requeues.
JOB_FORMAT = 3
# SQS takes at most 10 messages per SendMessageBatch, and at most 256 KiB per message and per batch in
# total. (Queues may accept more today; 256 KiB is the limit every queue and every Region honours.)
BATCH = 10
MAX_MESSAGE_BYTES = 256 * 1024


class Part(BaseModel):
    """Which share of its target a job carries."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int = Field(default=0, ge=0)
    count: int = Field(default=1, ge=1)
    # Tag discovery in this job: the clusters whose name hashes to ``shard`` of ``shards``.
    shard: int = Field(default=0, ge=0)
    shards: int = Field(default=1, ge=1)
    # Clusters of this target named explicitly in other jobs: this job's discovery leaves them alone.
    elsewhere: tuple[str, ...] = ()


class TargetJob(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = JOB_FORMAT
    account: str = Field(pattern=ACCOUNT_PATTERN)
    region: str = Field(min_length=1)
    role_arn: str = Field(min_length=1)
    scheduled_at: AwareDatetime
    config: Config
    # The fleet config's version (config_store) this job was built from: a newer one supersedes it.
    config_version: int = Field(default=0, ge=0)
    part: Part = Field(default_factory=Part)
    # The target's share of the SageMaker rate (already divided between its parts).
    rates: SagemakerRates = Field(default_factory=SagemakerRates)
    metrics_per_account: bool = False
    # The orchestrator's claim on this part (see deploy/markers.py); empty for a job invoked by hand.
    marker: str = ""

    @property
    def label(self) -> str:
        suffix = f" part {self.part.index + 1}/{self.part.count}" if self.part.count > 1 else ""
        return f"{self.account}/{self.region}{suffix}"

    @property
    def key(self) -> str:
        """The part's identity across ticks (the queue marker's key)."""
        return f"{self.account}/{self.region}/{self.part.index}of{self.part.count}"

    def governs(self, name: str, explicit: bool) -> bool:
        """Whether a cluster found in the account belongs to this job (explicit entries always do)."""
        if explicit:
            return True
        if name in self.part.elsewhere:
            return False
        return shard_of(name, self.part.shards) == self.part.shard


def shard_of(name: str, shards: int) -> int:
    """A hash that is the same in every process and release (Python's ``hash`` is salted per process)."""
    return zlib.crc32(name.encode("utf-8")) % shards if shards > 1 else 0


@dataclass(frozen=True)
class Unqueued:
    """A target (or part) that cannot be sent, and why (one line)."""

    label: str
    why: str


@dataclass(frozen=True)
class Fanout:
    jobs: list[TargetJob]
    unqueued: list[Unqueued]


def _referenced(target: FleetTarget, entries: Sequence[ClusterEntry], default: str | None) -> set[str]:
    found = {target.schedule, default, *(e.schedule for e in entries)}
    return {s.strip() for s in found if s}


def _parts(
    fleet: FleetConfig, target: FleetTarget, scheduled_at: datetime, per_message: int, version: int
) -> list[TargetJob]:
    chunks = [target.clusters[i : i + per_message] for i in range(0, len(target.clusters), per_message)]
    shards = target.tag_shards if target.tag_selector else 0
    count = max(len(chunks), shards, 1)
    named = [e.name for e in target.clusters]
    rates = fleet.hub.sagemaker
    share = rates.model_copy(
        update={
            "updates_per_second": rates.updates_per_second / count,
            "reads_per_second": rates.reads_per_second / count,
            "burst": max(1, rates.burst // count),
        }
    )
    jobs = []
    for i in range(count):
        entries = chunks[i] if i < len(chunks) else []
        discovers = i < shards
        names = {e.name for e in entries}
        part = Part(
            index=i,
            count=count,
            shard=i if discovers else 0,
            shards=max(shards, 1) if discovers else 1,
            elsewhere=tuple(n for n in named if n not in names) if discovers else (),
        )
        wanted = _referenced(target, entries, fleet.defaults.schedule)
        schedules = dict(fleet.schedules) if discovers else {k: v for k, v in fleet.schedules.items() if k in wanted}
        plain = Target.model_validate(
            {
                **target.model_dump(exclude={"account", "role_arn", "tag_shards", "clusters"}, exclude_unset=False),
                "clusters": [e.model_dump(exclude_unset=True) for e in entries],
                "tag_selector": discovers,
            }
        )
        config = Config(
            defaults=fleet.defaults, schedules=schedules, targets=[plain], notifications=fleet.notifications
        )
        jobs.append(
            TargetJob(
                account=target.account,
                region=target.region,
                role_arn=fleet.role_for(target),
                scheduled_at=scheduled_at,
                config=config,
                config_version=version,
                part=part,
                rates=share,
                metrics_per_account=fleet.hub.metrics_per_account,
            )
        )
    return jobs


def target_jobs(
    fleet: FleetConfig, target: FleetTarget, scheduled_at: datetime, config_version: int = 0
) -> list[TargetJob]:
    """The target's messages, each within SQS's size limit: split finer until they fit (UsageError if
    even one cluster per message does not)."""
    per_message = fleet.hub.clusters_per_message
    while True:
        jobs = _parts(fleet, target, scheduled_at, per_message, config_version)
        largest = max(jobs, key=body_size)
        size = body_size(largest)
        if size <= MAX_MESSAGE_BYTES:
            return jobs
        if per_message == 1 or len(largest.config.targets[0].clusters) <= 1:
            raise UsageError(
                f"account {target.account} region {target.region}: a message for {largest.label} is "
                f"{size / 1024:.0f} KiB, over SQS's {MAX_MESSAGE_BYTES // 1024} KiB (fewer or shorter "
                "schedules, notifications or policies; or more tag_shards)"
            )
        per_message = max(1, per_message // 2)


def jobs_for(fleet: FleetConfig, scheduled_at: datetime, config_version: int = 0) -> Fanout:
    """Every message of one tick; a target that cannot be sent is reported and the others still go."""
    jobs: list[TargetJob] = []
    unqueued: list[Unqueued] = []
    for target in fleet.targets:
        try:
            jobs.extend(target_jobs(fleet, target, scheduled_at, config_version))
        except UsageError as exc:
            unqueued.append(Unqueued(f"{target.account}/{target.region}", str(exc)))
    return Fanout(jobs, unqueued)


def encode_job(job: TargetJob) -> str:
    return job.model_dump_json(exclude_defaults=False)


def body_size(job: TargetJob) -> int:
    """The message body's size as SQS counts it (UTF-8 bytes)."""
    return len(encode_job(job).encode("utf-8"))


def decode_job(body: str) -> TargetJob:
    data: Any = bounded.load_json(body, "worker message")
    if isinstance(data, dict) and data.get("format", JOB_FORMAT) != JOB_FORMAT:
        raise UsageError(f"worker message: format {data.get('format')!r} is not {JOB_FORMAT} (hub out of date?)")
    try:
        return TargetJob.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "body"
        raise UsageError(f"worker message: {where}: {err['msg']}") from None


def claim_of(body: str) -> tuple[str, str] | None:
    """The (marker key, token) of a message the worker cannot decode (another format, a field it does not
    know), read from the fields every format has; None if it names none. So its claim is given back."""
    try:
        data: Any = bounded.load_json(body, "worker message")
    except UsageError:
        return None
    if not isinstance(data, dict):
        return None
    part: dict[str, Any] = data["part"] if isinstance(data.get("part"), dict) else {}
    account, region, token = data.get("account"), data.get("region"), data.get("marker")
    index, count = part.get("index", 0), part.get("count", 1)
    if not all(isinstance(v, str) and v for v in (account, region, token)):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (index, count)):
        return None
    return f"{account}/{region}/{index}of{count}", str(token)


def batches(bodies: Sequence[tuple[TargetJob, str]]) -> list[list[tuple[TargetJob, str]]]:
    """SendMessageBatch groups: at most ``BATCH`` messages and ``MAX_MESSAGE_BYTES`` in total each."""
    out: list[list[tuple[TargetJob, str]]] = []
    current: list[tuple[TargetJob, str]] = []
    size = 0
    for job, body in bodies:
        n = len(body.encode("utf-8"))
        if current and (len(current) == BATCH or size + n > MAX_MESSAGE_BYTES):
            out.append(current)
            current, size = [], 0
        current.append((job, body))
        size += n
    if current:
        out.append(current)
    return out
