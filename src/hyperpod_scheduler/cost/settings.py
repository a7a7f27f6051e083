"""The ``cost:`` section of the config file, typed (unknown keys are errors, like the rest of the config)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_FS_ID = re.compile(r"^fs-[0-9a-f]{8,17}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class PriceSettings(_Strict):
    # "bundled": the shipped table only (no network). "api": the AWS Price List API, cached on disk.
    source: Literal["bundled", "api"] = "bundled"
    override: str | None = None  # a JSON/YAML price file whose entries always win
    cache: str | None = None  # default: ~/.cache/hyperpod-scheduler/prices-<region>.json
    cache_ttl_hours: float = Field(default=168, gt=0, le=24 * 365)  # a year at most: it is added to a date
    region: str = Field(default="us-east-1", min_length=1)  # whose prices the API is asked for


class FsxSettings(_Strict):
    # Look for file systems in each cluster's provisioning_parameters.json and by the
    # hyperpod-scheduler:cluster=<name> tag.
    discover: bool = True
    # Cluster name -> FSx file system ids, for file systems discovery cannot see.
    file_systems: dict[str, list[str]] = Field(default_factory=dict)

    @field_validator("file_systems")
    @classmethod
    def _ids(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for cluster, ids in value.items():
            for fs_id in ids:
                if not _FS_ID.match(fs_id):
                    raise ValueError(f"file_systems.{cluster}: {fs_id!r} is not an FSx id (fs-0123456789abcdef0)")
        return value


class CostSettings(_Strict):
    prices: PriceSettings = Field(default_factory=PriceSettings)
    fsx: FsxSettings = Field(default_factory=FsxSettings)
