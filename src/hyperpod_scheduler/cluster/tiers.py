"""The three Slurm node-lifecycle tiers, read off a group's LifeCycleConfig."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class Tier(StrEnum):
    AMI = "ami"  # LifeCycleConfig omitted entirely
    AMI_EXTENSION = "ami+extension"  # SourceS3Uri + OnInitComplete
    CUSTOM = "custom"  # SourceS3Uri + OnCreate
    INVALID = "invalid"  # a block that is none of the above (validation reports why)


def tier_of(group: Mapping[str, Any]) -> Tier:
    """The tier of an instance group as sent to CreateCluster or returned by DescribeCluster."""
    if "LifeCycleConfig" not in group or group["LifeCycleConfig"] is None:
        return Tier.AMI
    lcc = group["LifeCycleConfig"]
    if not isinstance(lcc, Mapping):
        return Tier.INVALID
    has_uri = bool(lcc.get("SourceS3Uri"))
    if has_uri and lcc.get("OnCreate") and not lcc.get("OnInitComplete"):
        return Tier.CUSTOM
    if has_uri and lcc.get("OnInitComplete") and not lcc.get("OnCreate"):
        return Tier.AMI_EXTENSION
    return Tier.INVALID
