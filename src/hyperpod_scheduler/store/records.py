"""What the scheduler remembers per cluster, as versioned, JSON-serialisable pydantic models.

Every model tolerates and keeps fields it does not know (``extra="allow"``): a row written by a
newer release survives a read-modify-write by an older one, which matters once several runners
share one DynamoDB table. Models are frozen; change them with ``evolve`` (which re-validates).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from hyperpod_scheduler.aws.failures import FailureCause
from hyperpod_scheduler.inputs.text import shortened

# Bumped when a stored shape changes incompatibly; readers migrate older formats on load.
RECORD_FORMAT = 1
# Enough start timings for a stable "ready-by" lead time, small enough to keep rows tiny.
MAX_START_DURATIONS = 50
MAX_KEY_BYTES = 1024

Action = Literal["stop", "start"]
Phase = Literal["intent", "sent", "settled"]
# What an intent serves: a schedule transition, a manual command, a hold, or a start's retry.
Origin = Literal["schedule", "manual", "hold", "retry"]
Outcome = Literal["restored", "partial", "failed", "stopped", "kept"]
State = Literal["running", "stopped"]
Count = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
# Messages come from AWS, Slurm and people: one is kept to this many characters, so a 60 MB
# FailureMessage cannot make a 126 MB state file (what was cut is said, with its length).
MAX_TEXT = 2000


def _cut(text: str) -> str:
    return shortened(text, MAX_TEXT)


Text = Annotated[str, AfterValidator(_cut)]


_CONTROL = re.compile("[\x00-\x1f\x7f]")  # checked on every record read and written: one scan in C


def key_problem(key: object) -> str | None:
    """Why ``key`` cannot name a record, or None. Shared by models and store arguments."""
    if not isinstance(key, str) or not key:
        return "must be a non-empty string"
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        return f"is longer than {MAX_KEY_BYTES} bytes"
    if _CONTROL.search(key):
        return "contains a control character"
    return None


def _checked_key(key: str) -> str:
    problem = key_problem(key)
    if problem:
        raise ValueError(f"key {key!r} {problem}")
    return key


RecordKey = Annotated[str, AfterValidator(_checked_key)]


# The account part of keys written before records were keyed by account (read by the migration only).
LEGACY_ACCOUNT = "default"
_ACCOUNT = re.compile(r"^[0-9]{12}$")


def cluster_key(name: str, region: str, account: str | None = None) -> str:
    """The record key: what identifies a cluster in AWS (names are unique per account and region).
    Without an account it is the key records had before (``default/REGION/NAME``)."""
    return f"{account or LEGACY_ACCOUNT}/{region}/{name}"


def account_problem(account: object) -> str | None:
    if not isinstance(account, str) or not _ACCOUNT.match(account):
        return "is not a 12-digit AWS account id"
    return None


@dataclass(frozen=True)
class Reach:
    """How a cluster is reached: the AWS profile ("" for the default credential chain), region and
    name. Which account that reaches is learned once, from the cluster's ARN, and remembered."""

    profile: str
    region: str
    name: str

    def problem(self) -> str | None:
        for part, value in (("profile", self.profile), ("region", self.region), ("name", self.name)):
            if not isinstance(value, str) or (part != "profile" and not value):
                return f"{part} must be a non-empty string"
            if _CONTROL.search(value) or len(value.encode()) > 256:
                return f"{part} {value!r} is not a usable name"
        return None

    def __str__(self) -> str:
        who = f"profile '{self.profile}'" if self.profile else "the default credentials"
        return f"cluster '{self.name}' in {self.region} through {who}"


def request_digest(request: Mapping[str, Any]) -> str:
    """A stable digest of an UpdateCluster request, so a re-run can tell whether it is the same one."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Stored(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    def evolve(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied and validated (``model_copy`` would skip validation). The
        members kept are passed as they are: frozen models, validated when made, so not dumped and
        validated again (that was most of a store write's time)."""
        return self.model_validate({**dict(self), **changes})


class GroupSize(Stored):
    count: Count
    min_count: Count | None = None
    instance_type: str | None = None  # for cost reports: what the recorded nodes were
    # Every type the group may run (``GroupView.instance_types``): a flexible group has no
    # ``instance_type``. Empty in rows written before this field (read ``types`` instead).
    instance_types: list[str] = Field(default_factory=list, max_length=40)
    image_id: str | None = None  # CurrentImageId at the stop: a start that brings back another is reported
    image_release: str | None = None  # CurrentImageReleaseVersion at the stop
    health_checks: bool = False  # the group runs deep health checks on start (OnStartDeepHealthChecks)

    @property
    def types(self) -> tuple[str, ...]:
        """Every type the recorded group may run, from rows of any age."""
        if self.instance_types:
            return tuple(self.instance_types)
        return (self.instance_type,) if self.instance_type else ()

    @property
    def type_text(self) -> str:
        """The recorded type(s) for people, as ``GroupView.type_text`` words a group's."""
        return self.instance_type or ("flexible " + "|".join(self.types) if self.types else "of no known type")


class Snapshot(Stored):
    """The sizes recorded when a cluster was stopped: what a start restores."""

    taken_at: AwareDatetime
    sizes: dict[str, GroupSize]
    transition_id: str
    reason: str = ""
    kept: dict[str, Count] = Field(default_factory=dict)  # groups a guard left running, at this count
    # The cluster these sizes are of: a start onto another cluster of the same name (deleted and created
    # again while stopped) is refused. None in snapshots from before it was kept.
    cluster_arn: str | None = None
    # What FSx discovery reads of the DescribeCluster answer the stop was planned on (cost.fsx
    # storage_members: mounts, lifecycle prefixes, managed FSx): ``report`` then describes no cluster the
    # store knows. None in snapshots from before it was kept.
    storage: dict[str, Any] | None = None


# The phases of a start, in order: nodes asked for, launched, lifecycle setup passed, deep health
# checks passed (only when the group has them), joined Slurm (only when an agent can tell).
StartPhase = Literal["requested", "launched", "lifecycle", "health_checks", "slurm"]
START_PHASES: tuple[StartPhase, ...] = ("requested", "launched", "lifecycle", "health_checks", "slurm")
# Where a phase's times come from: node times and cluster events (Continuous mode), or what each look
# at DescribeCluster / ListClusterNodes found (the time is then when the look saw it, not when it happened).
PhaseSource = Literal["events", "nodes", "describe"]


class GroupPhases(Stored):
    """When one group's start passed each phase (the moment its last needed node did), and its counts at
    the latest look. A phase time is None until it is passed; ``health_checks`` stays None without
    deep health checks (``checks`` False), ``slurm`` when no Slurm agent answered."""

    group: str
    target: Count
    checks: bool = False
    source: PhaseSource = "describe"
    requested: AwareDatetime
    launched: AwareDatetime | None = None
    lifecycle: AwareDatetime | None = None
    health_checks: AwareDatetime | None = None
    slurm: AwareDatetime | None = None
    # Counts at the latest look: nodes launched, in lifecycle setup, in health checks, running; the
    # rest of the target has no instance yet (not launched yet; a capacity wait only when AWS says so).
    in_setup: Count = 0
    in_checks: Count = 0
    running: Count = 0
    seen_at: AwareDatetime | None = None

    @property
    def waiting(self) -> int:
        return max(0, self.target - self.in_setup - self.in_checks - self.running)

    def at(self, phase: StartPhase) -> datetime | None:
        value: datetime | None = getattr(self, phase)
        return value

    def ready_at(self) -> datetime | None:
        """When the group was ready: joined Slurm if that was seen, else its last API phase."""
        last = self.health_checks if self.checks else self.lifecycle
        return self.slurm or last

    def durations_s(self) -> dict[StartPhase, float]:
        """Seconds each passed phase took after the one before it (``requested`` is the origin)."""
        out: dict[StartPhase, float] = {}
        before = self.requested
        for phase in START_PHASES[1:]:
            at = self.at(phase)
            if at is None:
                continue
            out[phase] = max(0.0, (at - before).total_seconds())
            before = at
        return out


class ChecksWait(Stored):
    """An update refused because deep health checks were running: waited for and sent again, not a
    failure, until ``since`` + the settle timeout."""

    transition_id: str
    action: Action
    since: AwareDatetime
    attempts: Count = 1


PlanStatus = Literal["Pending", "Active", "Scheduled", "Expired", "Failed"]


class PlanWatch(Stored):
    """A training plan a group of this cluster runs on, as the last DescribeTrainingPlan showed it, and
    what the scheduler did about it: expiry warnings given (days before the end), the moment its group
    was started when a block became Active, and the reserved instance-seconds that ran idle per UTC day
    (``AvailableInstanceCount`` between looks while Active: paid for, not used)."""

    arn: str
    groups: list[str] = Field(default_factory=list)
    instance_type: str | None = None
    status: PlanStatus | None = None
    end: AwareDatetime | None = None
    total: Count = 0
    in_use: Count = 0
    available: Count = 0
    reserved_active: Count = 0  # instances of its type in Active blocks at the last look
    upfront_fee: float | None = None  # as DescribeTrainingPlan gives it (a string amount), if readable
    currency: str | None = None
    hours: float | None = None  # DurationHours + DurationMinutes / 60
    seen_at: AwareDatetime | None = None
    next_look: AwareDatetime | None = None
    warned: list[int] = Field(default_factory=list)
    activated_at: AwareDatetime | None = None
    # A start decided at activation and not yet taken by the engine (so a crash in between retries it).
    start_wanted: Count | None = None
    start_id: str | None = None
    idle_s_by_day: dict[str, Seconds] = Field(default_factory=dict)


ApprovalState = Literal["pending", "approved", "refused", "lapsed"]
MAX_APPROVALS = 20


class Approval(Stored):
    """A request to release scarce groups at one scheduled stop. The token that answers it is sent only
    in the notification; the store keeps its SHA-256 (so a reader of the store cannot approve). It is
    good once, until ``expires_at`` (the stop time): no answer by then keeps the groups."""

    id: str = Field(min_length=6, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    groups: list[str]
    transition_at: AwareDatetime
    asked_at: AwareDatetime
    expires_at: AwareDatetime
    state: ApprovalState = "pending"
    # What it approves: releasing groups at a stop, or moving groups to another AMI release at a start
    # (``transition_at`` is then that start; unanswered, the groups stay pinned).
    kind: Literal["release", "image"] = "release"
    by: str | None = None
    decided_at: AwareDatetime | None = None

    def state_at(self, now: datetime) -> ApprovalState:
        return "lapsed" if self.state == "pending" and now >= self.expires_at else self.state


class PendingAction(Stored):
    """Write-ahead intent for one UpdateCluster.

    ``intent`` is stored before the call, ``sent`` once AWS accepted it, ``settled`` when the cluster
    finished updating. After a crash, ``intent`` means the call may or may not have gone out (compare
    the cluster with ``request_digest``); ``sent`` means it did.
    """

    transition_id: str
    action: Action
    phase: Phase
    request_digest: str
    created_at: AwareDatetime
    updated_at: AwareDatetime
    # The per-group counts the request asks for, so a resumed run can rebuild or recognise it.
    targets: dict[str, Count] = Field(default_factory=dict)
    # The schedule instant this action carries out (recorded as applied once it settles).
    transition_at: AwareDatetime | None = None
    # What asked for it. None only in records written before this field: see ``served_by``.
    origin: Origin | None = None
    # A start's phases per restored group, as the latest look found them (see ``GroupPhases``).
    phases: dict[str, GroupPhases] = Field(default_factory=dict)

    def served_by(self) -> Origin:
        """The intent's origin; records from before ``origin`` existed are read from their transition id."""
        if self.origin is not None:
            return self.origin
        tid = self.transition_id
        if tid.startswith(("manual-", "dashboard-")):
            return "manual"
        if tid.startswith("hold-"):
            return "hold"
        return "retry" if "#retry" in tid else "schedule"


class GroupOutcome(Stored):
    group: str
    outcome: Outcome
    current: Count
    target: Count
    detail: Text = ""
    # Why it failed, as AWS said it (``aws.failures``, read once at the edge); None: not failed, or not said.
    cause: FailureCause | None = None


class AmiChange(Stored):
    """A group that a start brought back on another AMI than it ran when it was stopped."""

    group: str
    from_release: str | None = None
    to_release: str | None = None
    from_image: str | None = None
    to_image: str | None = None


ImageWhy = Literal["security update", "latest", "rolled back"]


class ImageUpdate(Stored):
    """One group moved to another HyperPod AMI release while the cluster was at zero, and why."""

    group: str
    from_release: str | None = None
    to_release: str
    why: ImageWhy


class ImageState(Stored):
    """The AMI releases the scheduler moves groups to (``engine.images``).

    ``pending``: the UpdateClusterSoftware intent, stored before the call (``phase`` intent, then sent);
    ``taken``: what it changed, told in the start's history line when that start settles; ``trial``:
    releases on their first morning; ``good``: each group's last release a start settled on;
    ``refused``: releases a group's first morning failed on, never taken again until a person says so."""

    pending: list[ImageUpdate] = Field(default_factory=list)
    phase: Phase | None = None
    since: AwareDatetime | None = None
    taken: list[ImageUpdate] = Field(default_factory=list)
    trial: dict[str, str] = Field(default_factory=dict)
    good: dict[str, str] = Field(default_factory=dict)
    refused: dict[str, list[str]] = Field(default_factory=dict)


class Refusal(Stored):
    """The last stop or start the engine would not send, and why (an autoscaled cluster, an answer with a
    member the installed botocore does not know). Cleared once an update goes out."""

    at: AwareDatetime
    action: Action
    reason: Text


class Hold(Stored):
    """A manual override of the schedule; ``until=None`` holds until released."""

    state: State
    until: AwareDatetime | None = None
    by: Text
    reason: Text = ""
    since: AwareDatetime | None = None  # when it was set: the hold's transitions are known by it

    def active(self, now: datetime) -> bool:
        return self.until is None or now < self.until


class RetryState(Stored):
    """A start that rolled back for capacity, to be sent again at ``next_at`` until ``deadline``."""

    transition_id: str
    attempt: Count  # attempts made so far
    next_at: AwareDatetime
    deadline: AwareDatetime
    reason: Text = ""
    # The schedule instant of the start it retries: a later transition ends it (``planner.live_retry``).
    transition_at: AwareDatetime | None = None


SlurmRole = Literal["Controller", "Login", "Compute"]


class SlurmRoles(Stored):
    """The Slurm roles of the groups SlurmConfig does not name, as the provisioning_parameters.json at
    each group's lifecycle source gave them (``cluster.slurm_roles``): read once, reused while the
    cluster has the same groups at the same sources (``sources``), read again when that changes, and
    (if it could not be read) after ``engine.slurm_roles.RETRY_UNREADABLE``."""

    roles: dict[str, SlurmRole] = Field(default_factory=dict)
    unknown: dict[str, Text] = Field(default_factory=dict)  # group -> why its role could not be learned
    sources: dict[str, str] = Field(default_factory=dict)  # every group -> its SourceS3Uri ("" for none)
    read_at: AwareDatetime
    # Roles the Slurm agent on the controller gave (``agent.shape``) for groups the file left unknown;
    # dropped with the rest when the file is read again. Empty in rows written before this field.
    agent: dict[str, SlurmRole] = Field(default_factory=dict)
    agent_seen_at: AwareDatetime | None = None  # when the agent saw them


class AwsReads(Stored):
    """How the engine's last DescribeCluster reads of the cluster went, so no face shows what the record
    holds as live while AWS does not answer: the last read that answered, the last that failed (AWS
    unreachable, throttled or failing), since when reads fail, and the error. ``failing_since`` is
    cleared by the next read that answers."""

    ok_at: AwareDatetime | None = None  # the last read that answered
    failed_at: AwareDatetime | None = None  # the last read that did not
    failing_since: AwareDatetime | None = None  # the first failure after the last good read; None: reads answer
    error: Text | None = None  # the last failure, one line
    # When reads began failing with no good read remembered: the record as it was written before (its
    # sizes are as of then).
    recorded_before: AwareDatetime | None = None

    @property
    def failing(self) -> bool:
        return self.failing_since is not None

    @property
    def sizes_as_of(self) -> datetime | None:
        """When what the record holds was last known from AWS: the later of the last good read and the
        record's last write before reads failed."""
        known = [t for t in (self.ok_at, self.recorded_before) if t is not None]
        return max(known) if known else None


class ClusterRecord(Stored):
    """Everything remembered about one cluster. ``version`` is owned by the store (compare-and-set)."""

    key: RecordKey
    version: Count = 0
    snapshot: Snapshot | None = None
    applied_state: State | None = None
    applied_transition_at: AwareDatetime | None = None
    # When a release handed the cluster back to its schedule (which then clears applied_transition_at):
    # a clock stepped back behind it must not decide from a past the record has already lived through.
    resumed_at: AwareDatetime | None = None
    pending: PendingAction | None = None
    last_outcomes: list[GroupOutcome] = Field(default_factory=list)
    hold: Hold | None = None
    retry: RetryState | None = None
    start_durations_s: list[Seconds] = Field(default_factory=list)
    # Per group, its recent starts' seconds per phase (``GroupPhases.durations_s``), for ready-by.
    group_phase_s: dict[str, list[dict[StartPhase, Seconds]]] = Field(default_factory=dict)
    checks_wait: ChecksWait | None = None
    plans: dict[str, PlanWatch] = Field(default_factory=dict)  # by plan ARN
    approvals: list[Approval] = Field(default_factory=list)  # newest last, the latest MAX_APPROVALS
    refused: Refusal | None = None
    ami_changes: list[AmiChange] = Field(default_factory=list)  # found when the last start settled
    images: ImageState = Field(default_factory=ImageState)
    updated_at: AwareDatetime
    record_format: int = RECORD_FORMAT
    # Set on a record from before account keys once it was given to its account's key (kept, not
    # deleted: the move is two writes, and this mark is what makes it safe to finish after a crash).
    moved_to: RecordKey | None = None
    # Accounts whose cluster such a record was found not to fit: they cannot be whose it is.
    misfits: list[str] = Field(default_factory=list)
    slurm_roles: SlurmRoles | None = None  # learned from provisioning_parameters.json (``SlurmRoles``)
    reads: AwsReads | None = None  # the last DescribeCluster reads, good and failed (``AwsReads``)

    @field_validator("start_durations_s")
    @classmethod
    def _bounded(cls, durations: list[float]) -> list[float]:
        # Trim rather than reject: an older row kept under a larger bound must still load.
        return durations[-MAX_START_DURATIONS:]

    @field_validator("group_phase_s")
    @classmethod
    def _bounded_groups(cls, starts: dict[str, list[dict[str, float]]]) -> dict[str, list[dict[str, float]]]:
        return {g: d[-MAX_START_DURATIONS:] for g, d in starts.items()}

    @classmethod
    def new(cls, key: str, now: datetime) -> ClusterRecord:
        """A record never stored yet (version 0)."""
        return cls(key=key, updated_at=now)

    def applied_from(self, at: datetime | None) -> datetime | None:
        """The transition instant to record as applied: never earlier than the one already applied. A
        person's command, a refusal or a no-op dated by a host clock stepped back since that transition
        would otherwise move it back, and an enforced tick would redo the older wish. None stays None
        (a hold released while its update was in flight: the schedule decides again)."""
        if at is None or self.applied_transition_at is None:
            return at
        return max(at, self.applied_transition_at)

    def at_version(self, version: int) -> ClusterRecord:
        """This record under the store's ``version``. Only that one member changes and it is checked
        here, so the rest is not validated again (``evolve`` re-validated every member: the stores do
        this on every read and write, three to five times per cluster per tick)."""
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise ValueError(f"record version {version!r} is not a non-negative integer")
        return self.model_copy(update={"version": version})

    def add_start_duration(
        self, seconds: float, now: datetime, groups: Mapping[str, Mapping[StartPhase, float]] | None = None
    ) -> ClusterRecord:
        by_group = {g: list(d) for g, d in self.group_phase_s.items()}
        for g, d in (groups or {}).items():
            by_group.setdefault(g, []).append(dict(d))
        return self.evolve(start_durations_s=[*self.start_durations_s, seconds], group_phase_s=by_group, updated_at=now)


class HistoryEntry(Stored):
    """One line of the action log: what happened to which cluster, when, by whom, and how long it took."""

    key: RecordKey
    at: AwareDatetime
    action: Text
    actor: Text
    outcome: Text
    duration_s: Seconds | None = None
    # Anything JSON-serialisable, or convertible (see ``_jsonable``); always plain JSON once stored.
    detail: dict[str, Any] = Field(default_factory=dict)
    record_format: int = RECORD_FORMAT

    @field_validator("detail", mode="before")
    @classmethod
    def _jsonable(cls, detail: Any) -> Any:
        # Callers pass whatever they have (datetimes, models, tuples); store its JSON form so the
        # entry reads back exactly as written. NaN and infinity are refused: JSON cannot carry them.
        if not isinstance(detail, Mapping):
            return detail
        try:
            return _cut_strings(json.loads(json.dumps(dict(detail), default=_json_fallback, allow_nan=False)))
        except TypeError as exc:  # e.g. a tuple used as a key
            raise ValueError(f"detail is not JSON-serialisable: {exc}") from None


def _cut_strings(value: Any) -> Any:
    """Every string in a JSON value kept to ``MAX_TEXT`` characters (AWS messages end up in details)."""
    if isinstance(value, str):
        return _cut(value)
    if isinstance(value, dict):
        return {k: _cut_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_strings(v) for v in value]
    return value


def _json_fallback(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)
