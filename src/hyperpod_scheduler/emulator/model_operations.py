"""Cluster operations (ListClusterOperations / DescribeClusterOperation): what each request is doing.

A ``Scaling`` operation is recorded for every CreateCluster, UpdateCluster, BatchAddClusterNodes or
BatchDeleteClusterNodes that changes an instance group's target (or minimum), with each group's
counts before and the counts asked for. A group's part is ``InProgress`` until the group has
settled at its target, ``Superseded`` when a later request changes the same group first, ``Done``
otherwise (also when a rollback ended it: the events say why). A ``DeepHealthCheck`` operation
covers the new nodes of one group (from one Scaling operation) while they run their on-start deep
health checks. AWS keeps operations for 14 days; so does the emulator.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hyperpod_scheduler.emulator.model_state import Cluster, ClusterOperation, Group, Node, ScalingEntry
from hyperpod_scheduler.emulator.model_world import World

RETENTION = timedelta(days=14)
IN_PROGRESS, SUPERSEDED, DONE = "InProgress", "Superseded", "Done"

Counts = tuple[int, int, int | None]  # (current, target, min) of a group at one moment


def counts(c: Cluster, g: Group) -> Counts:
    return c.running(g.name), g.target, g.min_count


def snapshot(c: Cluster) -> dict[str, Counts]:
    return {name: counts(c, g) for name, g in c.groups.items()}


def _config(current: int | None, target: int, minimum: int | None) -> dict[str, int]:
    out = {"TargetCount": target}
    if current is not None:
        out = {"CurrentCount": current, **out}
    if minimum is not None:
        out["MinCount"] = minimum
    return out


def begin_scaling(w: World, c: Cluster, t: datetime, before: dict[str, Counts]) -> ClusterOperation | None:
    """Record the Scaling operation of a request that has just changed the groups (``before``: the
    groups' counts as they were); None when no group's target or minimum changed."""
    entries: list[ScalingEntry] = []
    for name, g in c.groups.items():
        if g.status == "Deleting":
            continue
        current, target, minimum = before.get(name, (0, 0, None))
        if (target, minimum) == (g.target, g.min_count) and name in before:
            continue
        entries.append(
            ScalingEntry(name, IN_PROGRESS, _config(current, target, minimum), _config(None, g.target, g.min_count))
        )
    if not entries:
        return None
    op = ClusterOperation(w.rng.event_id(), "Scaling", t, entries)
    changed = {e.group for e in entries}
    for older in c.operations:
        for e in older.scaling:
            if e.group in changed and e.status == IN_PROGRESS:
                e.status = SUPERSEDED
    for name in changed:
        c.groups[name].scaling_op = op.operation_id
    c.operations.append(op)
    w.touch(c)
    return op


def health_checks_started(w: World, c: Cluster, node: Node, t: datetime) -> None:
    """A node entered its deep health checks: it joins (or opens) its batch's DeepHealthCheck operation."""
    g = c.groups.get(node.group)
    for op in reversed(c.operations):
        if op.kind == "DeepHealthCheck" and not op.done and op.group == node.group and op.parent == node.scaling_op:
            op.instances.append(node.instance_id)
            node.check_op = op.operation_id
            return
    checks = list((g.spec.get("OnStartDeepHealthChecks") or []) if g else [])
    op = ClusterOperation(
        w.rng.event_id(),
        "DeepHealthCheck",
        t,
        group=node.group,
        checks=checks,
        instances=[node.instance_id],
        parent=node.scaling_op,
    )
    node.check_op = op.operation_id
    c.operations.append(op)
    w.touch(c)


def _settled(c: Cluster, g: Group) -> bool:
    if g.status not in ("InService", "Degraded"):
        return False
    mine = c.group_nodes(g.name)
    if any(n.settling or not n.active or n.draining for n in mine):
        return False
    return c.running(g.name) == g.target


def refresh(c: Cluster, t: datetime) -> None:
    """Mark what has finished as Done, and forget operations past their retention."""
    for op in c.operations:
        if op.kind == "Scaling":
            for e in op.scaling:
                if e.status != IN_PROGRESS:
                    continue
                g = c.groups.get(e.group)
                ended = g is None or g.status == "Deleting" or c.status in ("Failed", "Deleting")
                if ended or (g is not None and _settled(c, g)):
                    e.status = DONE
                    if g is not None and g.scaling_op == op.operation_id:
                        g.scaling_op = None
        elif not op.done and not any(_checking(c.nodes.get(i)) for i in op.instances):
            op.done = True
    cutoff = t - RETENTION
    if c.operations and c.operations[0].created < cutoff:
        c.operations = [op for op in c.operations if op.created >= cutoff or op.status == IN_PROGRESS]


def _checking(n: Node | None) -> bool:
    return n is not None and n.phase == "deep-health-check"


def in_health_checks(c: Cluster) -> list[Node]:
    return [n for n in c.nodes.values() if n.phase == "deep-health-check" and not n.failed]
