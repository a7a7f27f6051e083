"""The fleet config: the CLI's ``Config`` whose targets also name an AWS account and the role to assume.

Until ``config.model.Target`` gains ``account`` and ``role_arn``, ``FleetTarget`` carries them and
``FleetConfig.for_target`` hands the engine a plain ``Config`` holding that one target.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hyperpod_scheduler.config.load import describe_validation_error
from hyperpod_scheduler.config.model import Config, Defaults, Target
from hyperpod_scheduler.errors import UsageError

DEFAULT_SPOKE_ROLE = "hyperpod-scheduler-spoke"
ACCOUNT_PATTERN = r"^\d{12}$"
ROLE_ARN_PATTERN = r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$"


class FleetTarget(Target):
    """A ``Target`` in one account. ``region`` is required: a Lambda has no default region to guess."""

    account: str = Field(pattern=ACCOUNT_PATTERN)
    region: str = Field(min_length=1)
    # Default: arn:aws:iam::<account>:role/<hub.spoke_role_name>, the role the spoke template creates.
    role_arn: str | None = Field(default=None, pattern=ROLE_ARN_PATTERN)


class Hub(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    spoke_role_name: str = Field(default=DEFAULT_SPOKE_ROLE, min_length=1)


class FleetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    defaults: Defaults = Field(default_factory=Defaults)
    schedules: dict[str, Any] = Field(default_factory=dict)
    targets: list[FleetTarget] = Field(default_factory=list)
    hub: Hub = Field(default_factory=Hub)

    def role_for(self, target: FleetTarget) -> str:
        return target.role_arn or f"arn:aws:iam::{target.account}:role/{self.hub.spoke_role_name}"

    def for_target(self, target: FleetTarget) -> Config:
        """The engine's view of one target: a plain Config with that target alone."""
        plain = Target.model_validate(target.model_dump(exclude={"account", "role_arn"}))
        return Config(defaults=self.defaults, schedules=self.schedules, targets=[plain])


def parse_fleet_config(data: Any, source: str = "fleet config") -> FleetConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
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
    return fleet


def parse_fleet_yaml(text: str, source: str = "fleet config") -> FleetConfig:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{source}:{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    return parse_fleet_config(data, source)
