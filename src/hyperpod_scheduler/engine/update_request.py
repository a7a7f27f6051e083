"""Build the UpdateCluster request that changes only instance counts.

HyperPod requires an existing group's InstanceType, ExecutionRole and ThreadsPerCore to match, and
what happens to omitted groups or an omitted LifeCycleConfig is unconfirmed (facts file). So every
group is re-sent in full, as DescribeCluster reports it, with only InstanceCount (and MinInstanceCount,
which may not exceed it) changed; LifeCycleConfig is copied exactly: absent stays absent.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from botocore.model import ListShape, Shape, StructureShape

from hyperpod_scheduler.aws.model import service_model, validate_request
from hyperpod_scheduler.engine.cluster_view import ClusterView, GroupView
from hyperpod_scheduler.errors import SpecError

# Describe members whose request twin has another name: the "Desired" value is what the group is
# configured to be, so re-sending it changes nothing.
_RENAMED: dict[str, dict[str, str]] = {
    "InstanceRequirements": {"DesiredInstanceTypes": "InstanceTypes"},
    "KubernetesConfig": {"DesiredLabels": "Labels", "DesiredTaints": "Taints"},
    "AutoPatchConfig": {"DesiredPatchSchedule": "PatchSchedule"},
}
# Not reported by DescribeCluster as a request value (only Current/Desired image ids); omitting them
# keeps the group's image as it is, whereas sending CurrentImageId would pin a group that floats.
_NEVER_COPIED = {"InstanceCount", "MinInstanceCount", "ImageId", "ImageReleaseVersion"}


def _prune(shape: Shape, value: Any) -> Any:
    """Keep only what the request shape knows, so a describe-only field can never leak into a request."""
    if isinstance(shape, StructureShape) and isinstance(value, Mapping):
        return {k: _prune(shape.members[k], v) for k, v in value.items() if k in shape.members}
    if isinstance(shape, ListShape) and isinstance(value, list):
        return [_prune(shape.member, v) for v in value]
    return copy.deepcopy(value)


def group_spec(group: GroupView, count: int, min_count: int | None) -> dict[str, Any]:
    shape = service_model().shape_for("ClusterInstanceGroupSpecification")
    assert isinstance(shape, StructureShape)
    spec: dict[str, Any] = {"InstanceGroupName": group.name, "InstanceCount": count}
    for member, member_shape in shape.members.items():
        if member in _NEVER_COPIED or member == "InstanceGroupName" or member not in group.details:
            continue
        value = group.details[member]
        renames = _RENAMED.get(member)
        if renames is not None and isinstance(value, Mapping):
            value = {renames[k]: v for k, v in value.items() if k in renames}
            if not value:
                continue
        spec[member] = _prune(member_shape, value)
    if min_count is not None:
        spec["MinInstanceCount"] = min(min_count, count)
    return spec


def build_update(view: ClusterView, counts: Mapping[str, tuple[int, int | None]]) -> dict[str, Any]:
    """One UpdateCluster request re-sending every group; ``counts`` maps group -> (count, min_count).

    Groups not in ``counts`` are re-sent unchanged. Raises ``SpecError`` if the request would not pass
    the botocore model: we never send a request AWS would reject for its shape.
    """
    unknown = set(counts) - {g.name for g in view.groups}
    if unknown:
        raise SpecError([], source=f"cluster '{view.name}': no such group(s) {sorted(unknown)}")
    groups = []
    for g in view.groups:
        count, min_count = counts.get(g.name, (g.target, g.min_count))
        groups.append(group_spec(g, count, min_count))
    request = {"ClusterName": view.name, "InstanceGroups": groups}
    problems = validate_request("UpdateCluster", request)
    if problems:
        raise SpecError(problems, source=f"UpdateCluster for '{view.name}' would be rejected")
    return request
