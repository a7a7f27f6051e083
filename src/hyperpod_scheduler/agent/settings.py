"""A cluster's checkpoint settings: the model the config embeds (``checkpoints:``) and the agent obeys.

The scheduler sends these settings with every intent, so the agent on the controller needs no config
file of its own and both sides always judge with the same rules.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

CheckpointPolicy = Literal["block", "checkpoint-then-stop", "force"]
SilentAgentPolicy = Literal["block", "allow"]

# Instance-local storage dies with the instance at scale-in (NVMe, the extra EBS volume, temp dirs).
BUILTIN_LOCAL_PATHS = ("/opt/dlami/nvme", "/opt/sagemaker", "/tmp", "/scratch")
COMMENT_PREFIX = "ckpt:"
DRAIN_REASON = "hyperpod-scheduler: scheduled stop"
_SIGNAL = re.compile(r"^(SIG)?[A-Z][A-Z0-9]*$|^[0-9]{1,2}$")
_TEMPLATE_FIELDS = ("{job_name}", "{job_id}", "{user}")


# Upper bounds keep every duration a datetime can add; NaN and infinity are refused outright.
WEEK_MINUTES = 7 * 24 * 60
DAY_SECONDS = 24 * 3600


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class LocationRule(_Strict):
    """Jobs whose name matches ``job`` (a shell pattern, e.g. ``llama-*``) keep checkpoints at ``location``."""

    job: str = Field(min_length=1)
    location: str = Field(min_length=1)

    def matches(self, job_name: str) -> bool:
        return fnmatch.fnmatchcase(job_name, self.job)


class CheckpointSettings(_Strict):
    """Per cluster. A job's location, first found wins: its ``--comment=ckpt:<location>``, the first
    matching rule in ``locations``, then ``location``. Locations are ``s3://bucket/prefix`` or an
    absolute path on shared storage; ``{job_name}``, ``{job_id}`` and ``{user}`` are filled in."""

    policy: CheckpointPolicy = "block"
    location: str | None = None
    locations: list[LocationRule] = Field(default_factory=list)
    comment_prefix: str = Field(default=COMMENT_PREFIX, min_length=1)
    local_paths: list[str] = Field(default_factory=list)  # beside BUILTIN_LOCAL_PATHS
    max_age_minutes: float = Field(default=60, gt=0, le=WEEK_MINUTES)
    grace_minutes: float = Field(default=10, ge=0, le=WEEK_MINUTES)
    signal: str = "USR1"
    signal_batch_only: bool = True  # scancel --batch: the batch shell traps the signal and saves
    agent_timeout_seconds: float = Field(default=120, gt=0, le=DAY_SECONDS)  # to pick an intent up (work time is extra)
    silent_agent: SilentAgentPolicy = "block"
    channel: str | None = None  # sqlite:///..., a store path, or s3://bucket/prefix; None: in-process
    requeue: bool | None = None  # None: requeue when the Slurm head survives the night
    slurmctld_state_shared: bool = False  # StateSaveLocation on shared storage: the queue survives
    partitions: dict[str, str] = Field(default_factory=dict)  # group -> partition (default: its SlurmConfig)
    nodes: dict[str, list[str]] = Field(default_factory=dict)  # group -> node names or hostlists
    poll_seconds: float = Field(default=5, gt=0, le=DAY_SECONDS)
    ready_timeout_minutes: float = Field(default=30, gt=0, le=WEEK_MINUTES)

    @field_validator("location")
    @classmethod
    def _location(cls, value: str | None) -> str | None:
        if value is not None:
            check_location(value, "location")
        return value

    @field_validator("locations")
    @classmethod
    def _rules(cls, rules: list[LocationRule]) -> list[LocationRule]:
        for i, rule in enumerate(rules):
            check_location(rule.location, f"locations[{i}].location")
        return rules

    @field_validator("local_paths")
    @classmethod
    def _absolute(cls, paths: list[str]) -> list[str]:
        for p in paths:
            if not p.startswith("/"):
                raise ValueError(f"local_paths: '{p}' must be an absolute path")
        return paths

    @field_validator("signal")
    @classmethod
    def _signal(cls, value: str) -> str:
        if not _SIGNAL.match(value):
            raise ValueError(f"signal: '{value}' is not a signal name (e.g. USR1) or number")
        return value

    def local_prefixes(self) -> tuple[str, ...]:
        return (*BUILTIN_LOCAL_PATHS, *self.local_paths)

    def max_age_s(self) -> float:
        return self.max_age_minutes * 60


def check_location(value: str, where: str) -> str:
    """``s3://bucket[/prefix]`` or an absolute path; raises ValueError naming ``where`` otherwise."""
    probe = value
    for name in _TEMPLATE_FIELDS:
        probe = probe.replace(name, "x")
    if "{" in probe or "}" in probe:
        raise ValueError(f"{where}: '{value}' uses a template field other than {', '.join(_TEMPLATE_FIELDS)}")
    if probe.startswith("s3://"):
        if not probe[5:].split("/", 1)[0]:
            raise ValueError(f"{where}: '{value}' names no bucket")
        return value
    if "://" in probe:
        raise ValueError(f"{where}: '{value}' must be s3://bucket/prefix or an absolute path")
    if not probe.startswith("/"):
        raise ValueError(f"{where}: '{value}' must be s3://bucket/prefix or an absolute path")
    return value
