"""Build the UpdateCluster request that changes only instance counts.

HyperPod requires an existing group's InstanceType, ExecutionRole and ThreadsPerCore to match, and
what happens to omitted groups or an omitted LifeCycleConfig is unconfirmed (facts file). So every
group is re-sent in full, as DescribeCluster reports it (``cluster.describe``), with only
InstanceCount (and MinInstanceCount, which may not exceed it) changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperpod_scheduler.aws.model import validate_request
from hyperpod_scheduler.cluster.describe import group_request_from_details
from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.errors import SpecError


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
        groups.append(group_request_from_details(g.details, count, min_count))
    request = {"ClusterName": view.name, "InstanceGroups": groups}
    problems = validate_request("UpdateCluster", request)
    if problems:
        raise SpecError(problems, source=f"UpdateCluster for '{view.name}' would be rejected")
    return request
