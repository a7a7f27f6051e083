"""The config file, typed. Unknown keys are errors (a typo must never silently disable a schedule)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCHEDULE_TAG = "hyperpod-scheduler:schedule"
DEFAULT_CONFIG_FILE = "hyperpod-scheduler.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterEntry(_Strict):
    """One cluster named explicitly. ``schedule`` is a schedule name or an inline expression."""

    name: str = Field(min_length=1)
    schedule: str | None = None
    enforced: bool | None = None


class Target(_Strict):
    """One region (and optional profile) and the clusters in it the scheduler governs."""

    region: str | None = None
    profile: str | None = None
    schedule: str | None = None  # default for this target's clusters
    enforced: bool | None = None
    clusters: list[ClusterEntry] = Field(default_factory=list)
    # Also govern every cluster in the region that carries the tag hyperpod-scheduler:schedule=<name>.
    tag_selector: bool = False

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
    settle_timeout_minutes: float = Field(default=180, gt=0)
    poll_seconds: float = Field(default=30, gt=0)


class Config(_Strict):
    state: str | None = None  # path or URL of the state store; default per user
    defaults: Defaults = Field(default_factory=Defaults)
    schedules: dict[str, Any] = Field(default_factory=dict)
    targets: list[Target] = Field(default_factory=list)
