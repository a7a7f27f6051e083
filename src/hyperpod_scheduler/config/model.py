"""The config file, typed. Unknown keys are errors (a typo must never silently disable a schedule),
and so are settings that cannot work together (a lease no longer than the poll interval, a first retry
after its own deadline, one cluster named twice): each is refused with one line naming both values.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from hyperpod_scheduler.agent.settings import CheckpointSettings
from hyperpod_scheduler.config.paths import DEFAULT_CONFIG_FILE as DEFAULT_CONFIG_FILE  # re-exported
from hyperpod_scheduler.config.paths import SCHEDULE_TAG as SCHEDULE_TAG
from hyperpod_scheduler.cost.settings import CostSettings
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import args
from hyperpod_scheduler.inputs.args import region_problem
from hyperpod_scheduler.inputs.urls import parse_url

# Upper bounds keep every duration a datetime can add (1e308 minutes used to end in OverflowError).
WEEK_MINUTES = 7 * 24 * 60
MAX_FLOOR = 100_000  # nodes a policy may keep in one group: far above any HyperPod group
DAY_SECONDS = 24 * 3600


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _unworkable(message: str) -> PydanticCustomError:
    # A custom error type keeps pydantic's "Value error, " prefix out of the one-line message.
    return PydanticCustomError("unworkable", message)


GroupPolicyValue = Literal["zero", "keep"] | dict[Literal["floor"], int]
# Which HyperPod AMI release a morning restores a group on: the one it ran (pinned), the newest settled
# one when the current is SecurityUpdateRequired or EndOfLife (security), or the newest settled one (latest).
ImageMode = Literal["pinned", "security", "latest"]
# ``checkpoints: none``: stops of these clusters need no checkpoint audit, said on purpose (an EKS cluster,
# which has no audit yet, is stopped on a schedule only with this said; every such stop says no audit ran).
Checkpoints = CheckpointSettings | Literal["none"]


class Policy(_Strict):
    """What a stop may release. Set at `defaults`, per target, or per cluster; the nearest wins per field."""

    release_scarce_capacity: bool | None = None  # release P4d/P5/P6/Trn2-class groups too
    keep_slurm_head: bool | None = None  # keep Controller and Login groups running overnight
    scarce_families: list[str] | None = None  # more families to protect (e.g. "g6e"), beside the built-in ones
    groups: dict[str, GroupPolicyValue] | None = None  # per instance group: zero | keep | {floor: N}
    # A stop/start re-sends each group's AMI (pin), or lets an omitted image mean "the latest" (follow-latest).
    ami: Literal["pin", "follow-latest"] | None = None
    # Members an answer carries that the installed botocore does not know, whose loss an update may accept
    # (by member name, e.g. "FancyNewSetting", or by path, e.g. "InstanceGroups[1].FancyNewSetting").
    accept_unknown_members: list[str] | None = None
    # A scheduled stop releases these groups (or every scarce one) only if a person approved it first:
    # the scheduler asks approval_minutes before the stop; no approval by the stop time keeps them.
    approve_release: list[str] | Literal["scarce"] | None = None
    approval_minutes: float | None = Field(default=None, gt=0, le=WEEK_MINUTES)
    # Patched by morning (docs/scheduler.md, "AMI releases"): each group's image policy (``image`` for
    # every group, ``image_groups`` per group), how old a release must be before it is taken (a release
    # withdrawn in its first days is then never taken), and whether a person approves each change.
    image: ImageMode | None = None
    image_groups: dict[str, ImageMode] | None = None
    image_settle_days: float | None = Field(default=None, ge=0, le=365)
    approve_image: bool | None = None

    @field_validator("groups", mode="before")
    @classmethod
    def _floors_are_counts(cls, value: Any) -> Any:
        # Before pydantic's coercion, which made `floor: true` and `floor: "2"` counts.
        for name, policy in value.items() if isinstance(value, dict) else ():
            floor = policy.get("floor") if isinstance(policy, dict) else None
            if isinstance(floor, float) and floor.is_integer():
                floor = int(floor)  # 2.0, as a tool may write it, is the count 2 (pydantic took it so)
            # A bool is an int to Python (`floor: true` was a floor of 1); no group holds a million nodes.
            if isinstance(policy, dict) and not (
                isinstance(floor, int) and not isinstance(floor, bool) and 0 <= floor <= MAX_FLOOR
            ):
                raise ValueError(f"group '{name}': floor must be a count from 0 to {MAX_FLOOR:,}, got {floor!r}")
        return value


class Retry(_Strict):
    """Start retries after an all-or-nothing capacity rollback."""

    deadline_minutes: float = Field(default=120, gt=0, le=WEEK_MINUTES)
    backoff_minutes: list[Annotated[float, Field(ge=0, le=WEEK_MINUTES)]] = Field(
        default_factory=lambda: [5.0, 10.0, 20.0, 30.0]
    )

    @model_validator(mode="after")
    def _workable(self) -> Self:
        for i, step in enumerate(self.backoff_minutes):
            if not step > 0:
                raise _unworkable(f"backoff_minutes[{i}] ({step:g}) must be a wait of more than 0 minutes")
        if self.backoff_minutes and self.backoff_minutes[0] > self.deadline_minutes:
            raise _unworkable(
                f"the first backoff ({self.backoff_minutes[0]:g} min) comes after deadline_minutes "
                f"({self.deadline_minutes:g}): no retry could ever be sent"
            )
        return self


class ReadyBy(_Strict):
    """How early a `ready_by` schedule starts: a high percentile of this cluster's start durations plus a margin."""

    percentile: float = Field(default=90, gt=0, le=100)
    margin_minutes: float = Field(default=10, ge=0, le=WEEK_MINUTES)
    default_minutes: float = Field(default=45, gt=0, le=WEEK_MINUTES)  # with no history yet
    max_minutes: float = Field(default=180, gt=0, le=WEEK_MINUTES)

    @model_validator(mode="after")
    def _workable(self) -> Self:
        if self.default_minutes > self.max_minutes:
            raise _unworkable(
                f"default_minutes ({self.default_minutes:g}) is more than max_minutes ({self.max_minutes:g}): "
                "the default lead would always be cut to the cap"
            )
        if self.margin_minutes >= self.max_minutes:
            raise _unworkable(
                f"margin_minutes ({self.margin_minutes:g}) is not less than max_minutes ({self.max_minutes:g}): "
                "every learned lead would be the cap"
            )
        return self


class Notifications(_Strict):
    """Where blocked stops, capacity shortfalls and failed starts are reported (env vars also work)."""

    sns_topic_arn: str | None = None
    webhook_url: str | None = None  # Slack-compatible incoming webhook (https); never logged
    webhook_allow_loopback: bool = False  # accept http:// to this machine: tests and local receivers only
    # Where the dashboard is reached, for the approval links notifications carry (e.g. https://ops/hps).
    dashboard_url: str | None = None

    @model_validator(mode="after")
    def _webhook_is_safe(self) -> Notifications:
        if self.webhook_url is not None:
            try:
                parse_url(self.webhook_url, allow_loopback=self.webhook_allow_loopback, where="webhook_url")
            except UsageError as exc:
                raise ValueError(str(exc)) from None
        return self


class ClusterEntry(_Strict):
    """One cluster named explicitly. ``schedule`` is a schedule name or an inline expression."""

    name: str = Field(min_length=1)
    schedule: str | None = None
    enforced: bool | None = None
    policy: Policy | None = None
    checkpoints: Checkpoints | None = None

    @field_validator("name")
    @classmethod
    def _api_name(cls, value: str) -> str:
        # The API's own pattern: a name DescribeCluster would reject is never looked up or stored.
        try:
            return args.cluster_name(value, "name")
        except UsageError as exc:
            raise ValueError(str(exc).removeprefix("name: ")) from None


class Target(_Strict):
    """One region (and optional profile) and the clusters in it the scheduler governs."""

    region: str | None = None
    profile: str | None = None
    schedule: str | None = None  # default for this target's clusters
    enforced: bool | None = None
    clusters: list[ClusterEntry] = Field(default_factory=list)
    # Also govern every cluster in the region that carries the tag hyperpod-scheduler:schedule=<name>.
    tag_selector: bool = False
    policy: Policy | None = None
    checkpoints: Checkpoints | None = None

    @field_validator("region")
    @classmethod
    def _a_region(cls, value: str | None) -> str | None:
        problem = None if value is None else region_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("clusters", mode="before")
    @classmethod
    def _names_as_entries(cls, value: Any) -> Any:
        # Allow the short form `clusters: [a, b]`.
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value


class Defaults(_Strict):
    schedule: str | None = None
    enforced: bool = False
    settle_timeout_minutes: float = Field(default=180, gt=0, le=WEEK_MINUTES)
    poll_seconds: float = Field(default=30, gt=0, le=DAY_SECONDS)
    concurrency: int = Field(default=8, ge=1, le=64)  # clusters handled at once in a tick
    # How long a runner's claim on a cluster lasts if it dies mid-action (it is renewed while waiting).
    lease_ttl_seconds: float = Field(default=900, gt=0, le=DAY_SECONDS)
    policy: Policy = Field(default_factory=Policy)
    retry: Retry = Field(default_factory=Retry)
    ready_by: ReadyBy = Field(default_factory=ReadyBy)
    checkpoints: Checkpoints | None = None  # the checkpoint audit before each stop (nearest block wins)

    @model_validator(mode="after")
    def _workable(self) -> Self:
        # A runner renews its lease after each poll: a lease that lapses within one poll makes every
        # --wait give up after its first look, believing another runner took over.
        if self.lease_ttl_seconds <= self.poll_seconds:
            raise _unworkable(
                f"lease_ttl_seconds ({self.lease_ttl_seconds:g}) must be longer than poll_seconds "
                f"({self.poll_seconds:g}): the lease would lapse between two looks at a settling cluster"
            )
        if self.settle_timeout_minutes * 60 <= self.poll_seconds:
            raise _unworkable(
                f"settle_timeout_minutes ({self.settle_timeout_minutes:g}) is not longer than one poll "
                f"(poll_seconds ({self.poll_seconds:g})): every update would time out at its first look"
            )
        return self


# Slack on top of the longest agent wait, for the describe and send around it.
LEASE_SLACK_S = 60.0


def audit_wait_s(settings: CheckpointSettings) -> tuple[float, str]:
    """The longest a runner can wait on the Slurm agent while holding a cluster's lease, and why.

    The agent has ``agent_timeout`` to pick an intent up and its work budget (grace before a stop,
    ready timeout after a start, plus two timeouts) to answer; the runner waits one timeout more."""
    stop = settings.grace_minutes * 60 + 3 * settings.agent_timeout_seconds
    start = settings.ready_timeout_minutes * 60 + 3 * settings.agent_timeout_seconds
    if stop >= start:
        return stop, f"grace_minutes ({settings.grace_minutes:g}) + 3 x agent_timeout_seconds"
    return start, f"ready_timeout_minutes ({settings.ready_timeout_minutes:g}) + 3 x agent_timeout_seconds"


# botocore's ImageReleaseVersion pattern, anchored (the model's own pattern is a search, not a match).
_RELEASE_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")


class ImageReleaseEntry(_Strict):
    """One HyperPod AMI release, as the team read it in AWS's release notes ("SageMaker HyperPod AMI
    releases"): no HyperPod API lists the releases or when each was published (docs/scheduler.md,
    "Where the releases come from"). ``released``: a date (midnight UTC) or a moment with its zone; the
    settling age counts from it. ``security``: the release fixes what makes older ones
    SecurityUpdateRequired."""

    version: str
    released: AwareDatetime
    security: bool = False

    @field_validator("version")
    @classmethod
    def _semantic(cls, value: str) -> str:
        if not _RELEASE_VERSION.match(value):
            raise _unworkable("must be MAJOR.MINOR.PATCH (e.g. 1.3.0)")
        return value

    @field_validator("released", mode="before")
    @classmethod
    def _date_is_midnight_utc(cls, value: Any) -> Any:
        if isinstance(value, date) and not isinstance(value, datetime):
            return datetime(value.year, value.month, value.day, tzinfo=UTC)
        if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
            try:
                return datetime.fromisoformat(value.strip()).replace(tzinfo=UTC)
            except ValueError:
                raise _unworkable("not a date (YYYY-MM-DD)") from None
        if isinstance(value, datetime) and value.tzinfo is None:
            raise _unworkable(f"name its zone (e.g. {value:%Y-%m-%dT%H:%M}Z)")
        return value


# Validation context: each target is its own account (the fleet deployment's config).
TARGETS_APART = "targets_apart"


class Config(_Strict):
    state: str | None = None  # path or URL of the state store; default per user

    @field_validator("state")
    @classmethod
    def _no_control_characters(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip():
            # A template's unset variable: the default store would be used, and the records this config's
            # clusters have elsewhere not found (a start would find "nothing recorded").
            raise ValueError("empty; leave it out for the default store, or name the store's path or URL")
        return args.location(value, "state").strip()

    defaults: Defaults = Field(default_factory=Defaults)
    schedules: dict[str, Any] = Field(default_factory=dict)
    targets: list[Target] = Field(default_factory=list)
    notifications: Notifications = Field(default_factory=Notifications)
    cost: CostSettings = Field(default_factory=CostSettings)
    # The HyperPod AMI releases an `image` policy may move a group to (docs/scheduler.md, "AMI releases").
    # Set, it is the one release source, on AWS and on the emulator alike.
    image_releases: list[ImageReleaseEntry] = Field(default_factory=list)

    @field_validator("image_releases")
    @classmethod
    def _each_version_once(cls, value: list[ImageReleaseEntry]) -> list[ImageReleaseEntry]:
        seen: set[str] = set()
        for i, entry in enumerate(value):
            if entry.version in seen:
                raise _unworkable(f"[{i}]: version {entry.version} is listed twice; list each release once")
            seen.add(entry.version)
        return value

    def checkpoint_blocks(self) -> Iterator[tuple[str, CheckpointSettings]]:
        """Every checkpoint audit the config asks for, with where (``checkpoints: none`` asks for none)."""
        if isinstance(self.defaults.checkpoints, CheckpointSettings):
            yield "defaults.checkpoints", self.defaults.checkpoints
        for i, target in enumerate(self.targets):
            if isinstance(target.checkpoints, CheckpointSettings):
                yield f"targets[{i}].checkpoints", target.checkpoints
            for j, entry in enumerate(target.clusters):
                if isinstance(entry.checkpoints, CheckpointSettings):
                    yield f"targets[{i}].clusters[{j}].checkpoints", entry.checkpoints

    @model_validator(mode="after")
    def _one_entry_per_cluster(self, info: ValidationInfo) -> Self:
        # One cluster named twice (same region and profile) would be governed by whichever entry came
        # last. The same name under two profiles is allowed: those can be two accounts' clusters. A
        # fleet config's targets are each their own account (context ``targets_apart``): the same name
        # may then appear once per target.
        apart = bool(info.context and info.context.get(TARGETS_APART))
        seen: dict[tuple[int, str | None, str | None, str], str] = {}
        for i, target in enumerate(self.targets):
            for j, entry in enumerate(target.clusters):
                where = f"targets[{i}].clusters[{j}]"
                first = seen.setdefault((i if apart else 0, target.region, target.profile, entry.name), where)
                if first != where:
                    raise _unworkable(
                        f"{where}: cluster '{entry.name}' is already named in {first} "
                        "(same region and profile); name each cluster once"
                    )
        return self

    @model_validator(mode="wrap")
    @classmethod
    def _lease_covers_the_audit(cls, data: Any, handler: ModelWrapValidatorHandler[Config]) -> Config:
        config = handler(data)
        blocks = list(config.checkpoint_blocks())
        if not blocks:
            return config
        wait, why, where = max((*audit_wait_s(s), w) for w, s in blocks)
        need = wait + LEASE_SLACK_S
        lease = config.defaults.lease_ttl_seconds
        if "lease_ttl_seconds" in config.defaults.model_fields_set:
            if lease < need:
                raise _unworkable(
                    f"defaults.lease_ttl_seconds ({lease:g}) is shorter than the checkpoint audit of {where} can "
                    f"hold a cluster ({why} = {wait:g} s, plus {LEASE_SLACK_S:g} s): another runner would take "
                    f"the cluster over mid-audit; set it to {need:g} or more"
                )
            return config
        if lease >= need:
            return config
        # Unset: the default is made long enough for the audit this config asks for.
        # Set on the instance itself: pydantic ignores another object returned from a validator when the
        # model is built with ``Config(...)`` (the demo and the fleet's jobs do), so a copy would be lost.
        defaults = config.defaults.model_copy(update={"lease_ttl_seconds": need})
        object.__setattr__(config, "defaults", defaults)  # frozen: set once, while it is being built
        return config


def merge_policies(*layers: Policy | None) -> Policy:
    """Field by field, the first layer that sets a value wins (cluster, then target, then defaults)."""
    merged: dict[str, Any] = {}
    for layer in layers:
        if layer is None:
            continue
        for name in Policy.model_fields:
            value = getattr(layer, name)
            if value is not None and name not in merged:
                merged[name] = value
    return Policy(**merged)
