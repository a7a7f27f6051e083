"""Build the UpdateCluster request that changes only instance counts.

HyperPod requires an existing group's InstanceType, ExecutionRole and ThreadsPerCore to match, and
what happens to omitted groups, members or cluster settings is unconfirmed (facts file). So every
group is re-sent in full, as DescribeCluster reports it (``cluster.describe``, driven by the botocore
model), with only InstanceCount (and MinInstanceCount, which may not exceed it) changed; restricted
groups and the cluster's own settings are re-sent as they are.

This is the only place an update is built, so the refusals of ``fidelity`` are enforced here: no path
(a tick, a manual stop, a resumed intent) can send an update that would drop what botocore cannot see.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperpod_scheduler.aws.model import validate_request
from hyperpod_scheduler.cluster.describe import cluster_settings, group_request_from_details
from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.config.model import Policy
from hyperpod_scheduler.engine import fidelity
from hyperpod_scheduler.errors import HyperpodSchedulerError, SpecError


class UpdateRefused(HyperpodSchedulerError):
    """No update may be sent to this cluster (``fidelity.refusal`` says why)."""


def build_update(
    view: ClusterView, counts: Mapping[str, tuple[int, int | None]], policy: Policy | None = None
) -> dict[str, Any]:
    """One UpdateCluster request re-sending every group; ``counts`` maps group -> (count, min_count).

    Groups not in ``counts`` are re-sent unchanged. Raises ``UpdateRefused`` when the cluster must not be
    updated at all, and ``SpecError`` if the request would not pass the botocore model: we never send a
    request AWS would reject for its shape.
    """
    policy = policy or Policy()
    reason = fidelity.refusal(view, policy)
    if reason is not None:
        raise UpdateRefused(f"cluster '{view.name}': {reason}")
    unknown = set(counts) - {g.name for g in view.groups}
    if unknown:
        raise SpecError([], source=f"cluster '{view.name}': no such group(s) {sorted(unknown)}")
    pin = fidelity.pin_image(policy)
    groups = []
    for g in view.groups:
        count, min_count = counts.get(g.name, (g.target, g.min_count))
        groups.append(group_request_from_details(g.details, count, min_count, pin_image=pin))
    request: dict[str, Any] = {"ClusterName": view.name, "InstanceGroups": groups}
    restricted = view.raw.get("RestrictedInstanceGroups")
    if isinstance(restricted, list) and restricted:
        request["RestrictedInstanceGroups"] = [
            group_request_from_details(r, pin_image=pin, restricted=True) for r in restricted if isinstance(r, Mapping)
        ]
    request.update(cluster_settings(view.raw))
    problems = validate_request("UpdateCluster", request)
    if problems:
        raise SpecError(problems, source=f"UpdateCluster for '{view.name}' would be rejected")
    return request
