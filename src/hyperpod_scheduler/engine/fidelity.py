"""What a stop or start must not change, as pure functions: when no update may be sent at all, and how a
start that brought a group back on another AMI is seen.

An update re-sends every group as DescribeCluster reports it. Two things make that unsafe, and the
cluster is then refused (one line, recorded, notified) rather than changed:

- the answer carries a member the installed botocore does not know: the parsed answer lacks it, so
  the rebuilt request would drop it (unless the cluster's policy accepts that loss by name);
- the cluster's counts are owned by autoscaling (``AutoScaling.Mode`` ``Enable``: Karpenter scales the
  groups, which AWS's guide has start at 0); resizing them would fight the autoscaler.
"""

from __future__ import annotations

from collections.abc import Mapping

from hyperpod_scheduler.aws.answers import UnknownMember, botocore_version
from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.config.model import Policy
from hyperpod_scheduler.store.records import AmiChange, GroupSize

AUTOSCALED = (
    "AutoScaling Mode is Enable: the autoscaler (Karpenter) owns this cluster's node counts, so the "
    "scheduler never resizes it"
)


def unaccepted_members(view: ClusterView, policy: Policy) -> tuple[UnknownMember, ...]:
    accepted = set(policy.accept_unknown_members or ())
    return tuple(u for u in view.unknown_members if u.member not in accepted and u.path not in accepted)


def refusal(view: ClusterView, policy: Policy) -> str | None:
    """Why no UpdateCluster may be sent to this cluster, or None."""
    if view.autoscaled:
        return AUTOSCALED
    unknown = unaccepted_members(view, policy)
    if not unknown:
        return None
    first = unknown[0]
    where = f"group '{first.group}' carries" if first.group else "the cluster carries"
    more = f" (and {len(unknown) - 1} more: {', '.join(u.path for u in unknown[1:4])})" if len(unknown) > 1 else ""
    return (
        f"{where} {first.path}{more}, which botocore {botocore_version()} does not know: an update rebuilt "
        f"from this answer would drop it, so none is sent; upgrade boto3/botocore, or accept the loss with "
        f"policy accept_unknown_members: [{first.member}]"
    )


def pin_image(policy: Policy) -> bool:
    """Re-send each group's AMI unless the policy follows the latest image."""
    return policy.ami != "follow-latest"


def ami_changes(recorded: Mapping[str, GroupSize], view: ClusterView) -> list[AmiChange]:
    """Groups whose running image differs from the one recorded when the cluster was stopped."""
    changes = []
    for g in view.groups:
        before = recorded.get(g.name)
        if before is None or g.current == 0:
            continue
        release_moved = before.image_release is not None and g.image_release not in (None, before.image_release)
        image_moved = before.image_id is not None and g.image_id not in (None, before.image_id)
        if release_moved or image_moved:
            changes.append(
                AmiChange(
                    group=g.name,
                    from_release=before.image_release,
                    to_release=g.image_release,
                    from_image=before.image_id,
                    to_image=g.image_id,
                )
            )
    return changes


def describe_changes(changes: list[AmiChange]) -> str:
    parts = []
    for c in changes:
        old = c.from_release or c.from_image or "?"
        new = c.to_release or c.to_image or "?"
        parts.append(f"group '{c.group}' came back on AMI {new} (was {old} at the stop)")
    return "; ".join(parts)
