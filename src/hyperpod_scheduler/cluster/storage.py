"""What FSx discovery reads of a DescribeCluster answer, cut out of it to be kept with a stop's sizes.

Its own small module, with nothing imported: the planner calls it for every stop, and ``status``
imports the planner (cost.fsx, which reads these members, brings botocore with it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RESTRICTED_CONFIG = "RestrictedInstanceGroupsConfig"


def storage_members(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The members of a DescribeCluster answer that FSx discovery reads (the groups' mounts and lifecycle
    prefixes, the restricted groups' managed FSx), and nothing else: what the engine keeps with a stop's
    sizes, so ``report`` finds a cluster's FSx without describing it again (issue 30)."""
    out: dict[str, Any] = {}
    for member in ("InstanceGroups", "RestrictedInstanceGroups"):
        groups = cluster.get(member)
        kept = []
        for group in groups if isinstance(groups, list) else []:
            if not isinstance(group, Mapping):
                continue
            one = {
                k: group[k] for k in ("InstanceGroupName", "InstanceStorageConfigs", "EnvironmentConfig") if k in group
            }
            lifecycle = group.get("LifeCycleConfig")
            if isinstance(lifecycle, Mapping) and "SourceS3Uri" in lifecycle:
                one["LifeCycleConfig"] = {"SourceS3Uri": lifecycle["SourceS3Uri"]}
            if len(one) > 1 or "InstanceGroupName" not in one:  # a group with nothing to find FSx by: left out
                kept.append(one)
        if kept:
            out[member] = kept
    config = cluster.get(RESTRICTED_CONFIG)
    shared = config.get("SharedEnvironmentConfig") if isinstance(config, Mapping) else None
    if isinstance(shared, Mapping) and "CurrentFSxLustreConfig" in shared:
        out[RESTRICTED_CONFIG] = {
            "SharedEnvironmentConfig": {"CurrentFSxLustreConfig": shared["CurrentFSxLustreConfig"]}
        }
    return out


__all__ = ["storage_members"]
