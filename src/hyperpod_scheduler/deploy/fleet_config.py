"""The fleet config: the CLI's ``Config`` whose targets also name an AWS account and the role to assume.

``FleetTarget`` carries ``account`` and ``role_arn``; ``FleetConfig.for_target`` hands the engine a
plain ``Config`` holding that one target. Every setting the fleet accepts is honoured by the worker
(it builds its engine through the same composition root as the CLI); what a worker cannot apply is
refused here, at ``config push``, with one line naming the key (see ``check_fleet``).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hyperpod_scheduler.agent.settings import CheckpointSettings
from hyperpod_scheduler.config.check import check_config, checkpoint_blocks
from hyperpod_scheduler.config.load import describe_validation_error
from hyperpod_scheduler.config.model import TARGETS_APART, Config, Defaults, Notifications, Target
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.guards.checkpoints import work_budget
from hyperpod_scheduler.inputs import bounded

DEFAULT_SPOKE_ROLE = "hyperpod-scheduler-spoke"
# The hub template's WorkerTimeout default; Lambda allows at most 900 seconds.
DEFAULT_WORKER_TIMEOUT_S = 900
# Named clusters per SQS message: at the default 1 UpdateCluster/s a message's stops take about a minute.
DEFAULT_CLUSTERS_PER_MESSAGE = 50
# What a worker run needs besides waiting for an agent: assume the role, describe, update, write state.
WORKER_MARGIN_S = 60
# Top-level keys of the CLI's config that have no meaning in the fleet, and why.
CLI_ONLY = {
    "state": "the fleet keeps its state in the hub's table ($HYPERPOD_SCHEDULER_TABLE); remove it",
    "cost": "the fleet prices nothing; `hyperpod-scheduler report --state dynamodb://<table>` reads the hub's "
    "history from the CLI with the CLI config's cost settings; remove it",
}
ACCOUNT_PATTERN = r"^[0-9]{12}$"  # ASCII: \d (and \w) also match other scripts' digits and letters
PARENT_PATTERN = r"^(r-[0-9a-z]{4,32}|ou-[0-9a-z]{4,32}-[a-z0-9]{8,32})$"
# The partition of a region, by its name's prefix (longest first): an ARN in another partition is refused.
PARTITIONS = (("us-isob-", "aws-iso-b"), ("us-iso-", "aws-iso"), ("us-gov-", "aws-us-gov"), ("cn-", "aws-cn"))
ROLE_ARN_PATTERN = r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9_+=,.@/-]+$"


class FleetTarget(Target):
    """A ``Target`` in one account. ``region`` is required: a Lambda has no default region to guess."""

    account: str = Field(pattern=ACCOUNT_PATTERN)
    region: str = Field(min_length=1)
    # Default: arn:aws:iam::<account>:role/<hub.spoke_role_name>, the role the spoke template creates.
    role_arn: str | None = Field(default=None, pattern=ROLE_ARN_PATTERN)
    # Tag-selected clusters are found by the worker, so the orchestrator cannot count them: a target with
    # many tagged clusters says into how many messages their discovery is split (by a hash of the name).
    tag_shards: int = Field(default=1, ge=1, le=64)


def partition_of(region: str) -> str:
    """``aws``, ``aws-cn``, ``aws-us-gov``, ...: the partition the region's ARNs name."""
    return next((p for prefix, p in PARTITIONS if region.startswith(prefix)), "aws")


class SagemakerRates(BaseModel):
    """The client-side limit on SageMaker calls per account and region (AWS publishes none; it throttles).

    Shared by every thread of a worker run and split between the messages of one target; a throttled
    answer cuts the run's rate and accepted calls raise it again. Raise these only when AWS has raised
    your account's limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    updates_per_second: float = Field(default=1.0, gt=0, le=100)
    reads_per_second: float = Field(default=5.0, gt=0, le=100)
    burst: int = Field(default=2, ge=1, le=100)  # calls of one kind that may go at once after a quiet spell
    jitter: float = Field(default=0.1, ge=0, le=1)  # up to this fraction of one interval added to a wait


class Hub(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    spoke_role_name: str = Field(default=DEFAULT_SPOKE_ROLE, min_length=1)
    # Must match the hub's WorkerTimeout: the longest a worker run may take (checkpoint waits included).
    worker_timeout_seconds: int = Field(default=DEFAULT_WORKER_TIMEOUT_S, ge=60, le=900)
    # A target naming more clusters than this is split into several messages (several workers).
    clusters_per_message: int = Field(default=DEFAULT_CLUSTERS_PER_MESSAGE, ge=1, le=1000)
    sagemaker: SagemakerRates = Field(default_factory=SagemakerRates)
    # EMF metrics per account too (one custom metric set per account and region, billed per metric).
    metrics_per_account: bool = False
    # The pause switch (with the hub's SchedulingActive parameter): no transition anywhere while true;
    # nothing is deleted, recorded sizes are kept, and the next tick after it is cleared catches up.
    paused: bool = False


class Organization(BaseModel):
    """Targets from AWS Organizations: every active account under ``parents`` (OUs or the root, nested
    OUs included), in each of ``regions``, with the settings ``target`` gives. Read by the orchestrator
    at every tick, so an account that joins the OU is governed from the next tick and one that leaves
    (or is suspended) no longer is. A target listed explicitly for an (account, region) wins."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    parents: list[str] = Field(min_length=1)
    regions: list[str] = Field(min_length=1)
    exclude_accounts: list[str] = Field(default_factory=list)
    target: dict[str, Any] = Field(default_factory=lambda: {"tag_selector": True})

    @field_validator("parents")
    @classmethod
    def _parents(cls, parents: list[str]) -> list[str]:
        for p in parents:
            if not re.fullmatch(PARENT_PATTERN, p):
                raise ValueError(f"'{p}' is not an OU id (ou-...) or a root id (r-...)")
        return parents

    @field_validator("exclude_accounts")
    @classmethod
    def _accounts(cls, accounts: list[str]) -> list[str]:
        for a in accounts:
            if not re.fullmatch(ACCOUNT_PATTERN, a):
                raise ValueError(f"'{a}' is not a 12-digit account id")
        return accounts


class FleetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    defaults: Defaults = Field(default_factory=Defaults)
    schedules: dict[str, Any] = Field(default_factory=dict)
    targets: list[FleetTarget] = Field(default_factory=list)
    notifications: Notifications = Field(default_factory=Notifications)
    hub: Hub = Field(default_factory=Hub)
    organization: Organization | None = None

    def registered(self, accounts: list[str]) -> FleetConfig:
        """This config with a target for every (account, region) of the organisation's ``accounts`` that
        no explicit target names."""
        org = self.organization
        if org is None:
            return self
        listed = {(t.account, t.region) for t in self.targets}
        extra = [
            FleetTarget.model_validate({**org.target, "account": a, "region": r})
            for a in sorted(set(accounts) - set(org.exclude_accounts))
            for r in org.regions
            if (a, r) not in listed
        ]
        return self.model_copy(update={"targets": [*self.targets, *extra]})

    def role_for(self, target: FleetTarget) -> str:
        partition = partition_of(target.region)
        return target.role_arn or f"arn:{partition}:iam::{target.account}:role/{self.hub.spoke_role_name}"

    def for_target(self, target: FleetTarget) -> Config:
        """The engine's view of one target: a plain Config with that target alone."""
        return self._config([target])

    def as_config(self) -> Config:
        """Every target as the engine reads it, in the file's order (so errors name the same index)."""
        return self._config(self.targets)

    def _config(self, targets: list[FleetTarget]) -> Config:
        plain = [Target.model_validate(t.model_dump(exclude={"account", "role_arn", "tag_shards"})) for t in targets]
        fields = {"defaults": self.defaults, "schedules": self.schedules, "targets": plain}
        # Each target is its own account: one cluster name may be listed once in each.
        return Config.model_validate({**fields, "notifications": self.notifications}, context={TARGETS_APART: True})


def parse_fleet_config(data: Any, source: str = "fleet config") -> FleetConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    for key, why in CLI_ONLY.items():
        if key in data:
            raise UsageError(f"{source}: {key}: {why}")
    try:
        fleet = FleetConfig.model_validate(data)
    except ValidationError as exc:
        raise UsageError(describe_validation_error(exc, source)) from None
    seen: set[tuple[str, str]] = set()
    for i, target in enumerate(fleet.targets):
        place = (target.account, target.region)
        if place in seen:
            raise UsageError(
                f"{source}: targets[{i}]: account {target.account} region {target.region} is listed twice "
                "(merge the two entries: one worker runs per account and region)"
            )
        seen.add(place)
    try:
        plain = fleet.as_config()
    except ValidationError as exc:  # a rule of the plain config (a cluster named twice in one target)
        raise UsageError(describe_validation_error(exc, source)) from None
    check_config(plain, source)
    check_fleet(fleet, source)
    if fleet.organization is not None:
        _check_organization(fleet, source)
    return fleet


def _check_organization(fleet: FleetConfig, source: str) -> None:
    """What each registered target will be, checked now with a stand-in account (as push checks any)."""
    org = fleet.organization
    assert org is not None
    for key in ("account", "region", "role_arn"):
        if key in org.target:
            raise UsageError(
                f"{source}: organization.target.{key}: set per account by the registration; remove it "
                "(each account's role is hub.spoke_role_name)"
            )
    try:
        sample = fleet.registered(["000000000000"])
    except ValidationError as exc:
        raise UsageError(describe_validation_error(exc, f"{source}: organization.target")) from None
    check_config(sample.as_config(), source)
    check_fleet(sample, source)


def check_fleet(fleet: FleetConfig, source: str = "fleet config") -> None:
    """Refuse, with one line naming the key, what a worker in Lambda cannot honour."""
    budget = fleet.hub.worker_timeout_seconds
    for i, target in enumerate(fleet.targets):
        if target.role_arn is not None:
            _check_role(source, i, target)
        if target.profile is not None:
            raise UsageError(
                f"{source}: targets[{i}].profile: a worker has no AWS profiles; it assumes role_arn "
                f"(default: the spoke role {fleet.hub.spoke_role_name}) in account {target.account}; remove it"
            )
    if "poll_seconds" in fleet.defaults.model_fields_set:
        raise UsageError(
            f"{source}: defaults.poll_seconds: a worker never waits on an update (each tick looks once and "
            "the next tick follows it); remove it"
        )
    if fleet.defaults.lease_ttl_seconds < budget:
        raise UsageError(
            f"{source}: defaults.lease_ttl_seconds: {fleet.defaults.lease_ttl_seconds:g} is shorter than a worker "
            f"may run (hub.worker_timeout_seconds {budget}): a duplicate delivery could take a cluster over from a "
            "worker still acting on it"
        )
    for where, settings in checkpoint_blocks(fleet.as_config()):
        _check_fleet_checkpoints(source, where, settings, budget)


def _check_role(source: str, i: int, target: FleetTarget) -> None:
    """A target's role must be in its own account and its region's partition: the worker would act in
    another account than the one its records and metrics name."""
    role = str(target.role_arn)
    partition, account = role.split(":")[1], role.split(":")[4]
    if account != target.account:
        raise UsageError(
            f"{source}: targets[{i}].role_arn: '{role}' is in account {account}, but the target's account is "
            f"{target.account}; name a role in {target.account}"
        )
    wanted = partition_of(target.region)
    if partition != wanted:
        raise UsageError(
            f"{source}: targets[{i}].role_arn: '{role}' is in partition {partition}, but region {target.region} "
            f"is in {wanted} (arn:{wanted}:iam::...)"
        )


def _check_fleet_checkpoints(source: str, where: str, settings: CheckpointSettings, budget: int) -> None:
    channel = settings.channel
    if channel is None:
        raise UsageError(
            f"{source}: {where}.channel: not set, so the audit would run Slurm's commands inside the Lambda "
            "worker, where there is no Slurm; set s3://BUCKET/PREFIX (read through the spoke role) or "
            "dynamodb://<hub state table> and run the agent on the controller"
        )
    if not channel.startswith(("s3://", "dynamodb://")):
        raise UsageError(
            f"{source}: {where}.channel: '{channel}' is a file only this machine can read, not the Lambda "
            "worker; use s3://BUCKET/PREFIX or dynamodb://<hub state table>"
        )
    timeout = settings.agent_timeout_seconds
    for action, what in (("stop", "grace_minutes"), ("start", "ready_timeout_minutes")):
        # The guard waits until the intent expires plus one agent timeout (guards.checkpoints.ChannelLink).
        worst = (work_budget(settings, action) + timedelta(seconds=timeout)).total_seconds()
        if worst > budget - WORKER_MARGIN_S:
            raise UsageError(
                f"{source}: {where}: the agent may hold a worker {worst / 60:.1f} min at a {action} "
                f"({what} {getattr(settings, what):g} + 3 x agent_timeout_seconds {timeout:g}s), longer than a "
                f"worker may run (hub.worker_timeout_seconds {budget} less {WORKER_MARGIN_S}s for the cluster's "
                f"own calls); lower {what} or agent_timeout_seconds"
            )


def parse_fleet_yaml(text: str, source: str = "fleet config") -> FleetConfig:
    return parse_fleet_config(bounded.load_yaml(text, source), source)
