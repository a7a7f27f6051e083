"""The cluster state machine: what each scheduled change does, and the Default provisioning mode.

Default mode is all-or-nothing: an operation (create/update) checks the pool for everything it needs;
short of anything, it fails and rolls back. Scale-in of an update waits until its launches have all
succeeded, so a rollback never has to re-launch removed nodes. Continuous mode lives in
``model_continuous``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from hyperpod_scheduler.emulator import model_continuous as cont
from hyperpod_scheduler.emulator import model_nodes as nodes
from hyperpod_scheduler.emulator.model_state import Cluster, Group, Operation
from hyperpod_scheduler.emulator.model_world import World

# --- operations: entry points used by the API layer ------------------------------------------------


def begin_operation(
    w: World, c: Cluster, t: datetime, kind: str, snapshot: dict[str, dict[str, Any]], operation: str | None = None
) -> None:
    """Start a create or update: status Creating/Updating, launches after a short set-up delay."""
    c.op_counter += 1
    c.op = Operation(kind, c.op_counter, snapshot)
    c.status = "Creating" if kind == "create" else "Updating"
    for g in cont.live_groups(c):
        extra = c.active(g.name) - g.target
        for n in nodes.scale_in_order(c.group_nodes(g.name))[: max(0, extra)]:
            n.draining = True  # removed once the launches succeed; CurrentCount no longer counts it
    timing = w.capacity.timing
    w.after(c, t, timing.cluster_setup if kind == "create" else timing.update_start, "op_begin", op=c.op_counter)
    w.event(
        c, t, "Info", "Cluster", f"Cluster {'creation' if kind == 'create' else 'update'} started", operation=operation
    )


def continuous_update(w: World, c: Cluster, t: datetime, touched: list[str]) -> None:
    """Continuous mode: the cluster stays InService; touched groups fill or shrink right away."""
    c.op_counter += 1
    for name in touched:
        g = c.groups.get(name)
        if g is None:
            continue
        if g.status == "Deleting":
            for n in c.group_nodes(name):
                nodes.shut_down(w, c, n, t, "instance group deleted")
            if not c.group_nodes(name):
                nodes.drop_group(w, c, g, t)
            continue
        nodes.shrink(w, c, g, t)
        launched = cont.fill(w, c, g, t, c.op_counter)
        if g.status == "Creating":
            g.wave = [n.instance_id for n in launched]
        cont.arm_min_check(w, c, g, t)
        cont.group_progress(w, c, g, t)


def begin_delete(w: World, c: Cluster, t: datetime) -> None:
    c.status = "Deleting"
    c.op = None
    w.cancel(c, keep=("node_gone",))
    for g in c.groups.values():
        g.status = "Deleting"
        g.retry_pending = False
    for n in list(c.nodes.values()):
        nodes.shut_down(w, c, n, t, "cluster deleted")
    w.event(c, t, "Info", "Cluster", "Cluster deletion started")
    if not c.nodes:
        w.after(c, t, w.capacity.timing.delete_cluster, "delete_done")


# --- scheduled changes ---------------------------------------------------------------------------------


def on_op_begin(w: World, c: Cluster, t: datetime, args: dict[str, Any]) -> None:
    if c.op is None or c.op.number != args.get("op"):
        return
    if c.continuous and c.op.kind == "create":
        cont.continuous_start(w, c, t)
        return
    need: dict[tuple[str, str | None], int] = {}
    for g in cont.live_groups(c):
        short = g.target - c.active(g.name)
        if short > 0:
            key = (g.instance_type, cont.plan_of(g))
            need[key] = need.get(key, 0) + short
    lacking = []
    for (itype, plan), n in need.items():
        free = w.free(itype, t, plan)
        injected = w.fail_next.get(itype, 0)
        if injected:
            w.fail_next[itype] = max(0, injected - n)
        if injected or (free is not None and free < n):
            lacking.append(itype)
    if lacking:
        c.op.failure = cont.CAPACITY_FAILURE
        for itype in sorted(lacking):
            w.event(c, t, "Error", "Cluster", cont.capacity_warning(itype), FailureMessage=cont.CAPACITY_FAILURE)
        w.after(c, t, w.capacity.timing.capacity_failure_detection, "op_failed", op=c.op.number)
        return
    for g in cont.live_groups(c):
        for _ in range(max(0, g.target - c.active(g.name))):
            nodes.launch(w, c, g, t, c.op.number)
    _settle(w, c, t)


def on_op_failed(w: World, c: Cluster, t: datetime, args: dict[str, Any]) -> None:
    if c.op is None or c.op.number != args.get("op"):
        return
    _roll_back(w, c, t, c.op.failure or cont.CAPACITY_FAILURE)


def on_rollback_done(w: World, c: Cluster, t: datetime, args: dict[str, Any]) -> None:
    if c.op is None or c.op.kind != "rollback":
        return
    failed_create = bool(args.get("create"))
    c.op = None
    if failed_create:
        c.status = "Failed"
        for g in c.groups.values():
            g.status = "Failed"
        w.event(
            c, t, "Error", "Cluster", f"Cluster creation failed: {c.failure_message}", FailureMessage=c.failure_message
        )
    else:
        c.status = "InService"
        for g in list(c.groups.values()):
            if g.status != "Deleting":
                g.status = "InService"
            elif not c.group_nodes(g.name):
                nodes.drop_group(w, c, g, t)
        w.event(
            c,
            t,
            "Warn",
            "Cluster",
            "Cluster update rolled back to the previous configuration",
            FailureMessage=c.failure_message,
        )


def on_phase_done(w: World, c: Cluster, t: datetime, args: dict[str, Any]) -> None:
    node = c.nodes.get(args["node"])
    if node is None or not node.settling:
        return
    result = nodes.advance(w, c, node, t)
    g = c.groups.get(node.group)
    if result == "failed":
        if not c.continuous:
            nodes.shut_down(w, c, node, t, "lifecycle script failure")
            if c.op is not None and c.op.kind in ("create", "update"):
                _roll_back(w, c, t, nodes.LIFECYCLE_FAILURE)
            return
        nodes.shut_down(w, c, node, t, "lifecycle script failure")
        if g is not None and g.node_type == "Controller" and c.status == "Creating":
            cont.fail_continuous(w, c, t, nodes.LIFECYCLE_FAILURE)
            return
        if g is not None:
            if g.status == "InService" and c.running(g.name) < (g.min_count or 0):
                g.status = "Degraded"  # below its minimum until the replacement runs
            cont.ensure_retry(w, c, g, t)
        return
    if result != "running":
        return
    if c.continuous:
        if g is not None:
            cont.group_progress(w, c, g, t)
        cont.continuous_cluster_progress(w, c, t)
    else:
        _settle(w, c, t)


def on_node_gone(w: World, c: Cluster, t: datetime, args: dict[str, Any]) -> None:
    node = c.nodes.get(args["node"])
    if node is None:
        return
    nodes.remove(w, c, node, t)
    if c.status == "Deleting":
        if not c.nodes:
            w.after(c, t, w.capacity.timing.delete_cluster, "delete_done")
        return
    g = c.groups.get(node.group)
    settling_op = c.op is not None and c.op.kind in ("create", "update")
    if g is not None and g.status == "Deleting" and not c.group_nodes(g.name) and not settling_op:
        nodes.drop_group(w, c, g, t)
        g = None
    if not c.continuous and c.op is not None and c.op.kind in ("create", "update"):
        _settle(w, c, t)
    elif c.continuous and g is not None and g.status != "Deleting":
        cont.group_progress(w, c, g, t)


def on_retry(w: World, c: Cluster, t: datetime, args: dict[str, Any]) -> None:
    g = c.groups.get(args["group"])
    if g is None:
        return
    g.retry_pending = False
    if c.status in ("Deleting", "Failed") or g.status in ("Deleting", "Failed"):
        return
    cont.fill(w, c, g, t, c.op_counter)
    cont.group_progress(w, c, g, t)


def on_min_check(w: World, c: Cluster, t: datetime, args: dict[str, Any]) -> None:
    g = c.groups.get(args["group"])
    if g is None or g.min_token != args.get("token") or g.status == "Deleting":
        return
    minimum = g.min_count or 0
    running = c.running(g.name)
    if running >= minimum:
        g.stable_target, g.stable_min = g.target, g.min_count  # these are now InService values
        return
    message = (
        f"Instance group {g.name} did not reach its MinInstanceCount of {minimum} within 3 hours "
        f"({running} running); rolling back to TargetCount {g.stable_target}"
    )
    w.event(
        c,
        t,
        "Error",
        "InstanceGroup",
        message,
        group=g.name,
        InstanceGroupScaling={
            "InstanceCount": running,
            "TargetCount": g.target,
            "MinCount": minimum,
            "FailureMessage": message,
        },
    )
    g.target = g.stable_target
    g.min_count = g.stable_min if g.stable_min is not None else 0
    g.logical_queue.clear()
    nodes.shrink(w, c, g, t)
    g.status = "InService"
    cont.group_progress(w, c, g, t)


def on_delete_done(w: World, c: Cluster, t: datetime, args: dict[str, Any]) -> None:
    if c.status == "Deleting" and not c.nodes:
        w.remove_cluster(c)


# --- training plans: what a plan can give changes when one of its blocks starts or ends ----------------


def arm_plan_boundaries(w: World, c: Cluster, t: datetime) -> None:
    """Schedule a look at every future start and end of the blocks of the plans this cluster uses."""
    armed = {(s.args.get("plan"), s.time) for s in c.pending.values() if s.kind == "plan_boundary"}
    for arn in sorted({a for g in c.groups.values() if (a := cont.plan_of(g)) is not None}):
        plan = w.plans().get(arn)
        if plan is None:
            continue
        for when in plan.boundaries(w.origin):
            if when > t and (arn, when) not in armed:
                w.schedule(c, when, "plan_boundary", plan=arn)


def on_plan_boundary(w: World, c: Cluster, t: datetime, args: dict[str, Any]) -> None:
    """Reserved capacity that ended is returned at once (its nodes go away); capacity that started is
    used by Continuous groups right away."""
    arn = args.get("plan")
    plan = w.plans().get(arn) if isinstance(arn, str) else None
    if plan is None or c.status in ("Deleting", "Failed"):
        return
    for g in cont.live_groups(c):
        if cont.plan_of(g) != arn:
            continue
        allowed = plan.active_count(g.instance_type, t, w.origin)
        holding = [n for n in c.group_nodes(g.name) if n.active and n.plan == arn]
        for n in nodes.scale_in_order(holding)[: max(0, len(holding) - allowed)]:
            nodes.shut_down(w, c, n, t, f"training plan {plan.name} capacity ended")
        if allowed < len(holding):
            w.event(
                c,
                t,
                "Warn",
                "InstanceGroup",
                f"Training plan {plan.name} has {allowed} active {g.instance_type} instances; "
                f"{len(holding) - allowed} of the group's nodes were returned",
                group=g.name,
            )
        if c.continuous and g.target > c.active(g.name):
            cont.fill(w, c, g, t, c.op_counter)
            cont.group_progress(w, c, g, t)


HANDLERS: dict[str, Callable[[World, Cluster, datetime, dict[str, Any]], None]] = {
    "op_begin": on_op_begin,
    "op_failed": on_op_failed,
    "rollback_done": on_rollback_done,
    "phase_done": on_phase_done,
    "node_gone": on_node_gone,
    "retry": on_retry,
    "min_check": on_min_check,
    "delete_done": on_delete_done,
    "plan_boundary": on_plan_boundary,
}


# --- Default mode -------------------------------------------------------------------------------------


def _settle(w: World, c: Cluster, t: datetime) -> None:
    """Finish the operation once every launch runs; only then remove what the update scales in."""
    if c.op is None or c.op.kind not in ("create", "update"):
        return
    if any(n.settling for n in c.nodes.values()):
        return
    for g in c.groups.values():
        if g.status == "Deleting":
            for n in c.group_nodes(g.name):
                nodes.shut_down(w, c, n, t, "instance group deleted")
        else:
            nodes.shrink(w, c, g, t)
    if any(not n.active for n in c.nodes.values()):
        return  # wait for the scale-in to finish
    kind = c.op.kind
    c.op = None
    c.status = "InService"
    c.failure_message = None
    for g in list(c.groups.values()):
        if g.status == "Deleting":
            nodes.drop_group(w, c, g, t)
        else:
            g.status = "InService"
            g.stable_target, g.stable_min = g.target, g.min_count
    w.event(c, t, "Info", "Cluster", "Cluster is InService" if kind == "create" else "Cluster update completed")


def _roll_back(w: World, c: Cluster, t: datetime, message: str) -> None:
    assert c.op is not None
    failed = c.op
    c.status = "RollingBack"
    c.failure_message = message
    w.event(c, t, "Error", "Cluster", f"Rolling back: {message}", FailureMessage=message)
    for n in list(c.nodes.values()):
        if n.op == failed.number or failed.kind == "create":
            nodes.shut_down(w, c, n, t, "rollback")
        n.draining = False  # nodes the update meant to remove stay
    if failed.kind == "update":
        restored: dict[str, Group] = {}
        for name, data in failed.snapshot.items():
            restored[name] = Group.from_dict(data)
        for name in c.groups:
            if name not in restored:  # a group this update added
                for n in c.group_nodes(name):
                    nodes.shut_down(w, c, n, t, "rollback")
        c.groups = restored
        for n in c.nodes.values():
            if n.group not in c.groups:
                c.groups[n.group] = Group(n.group, {}, 0, None, "Deleting", failed.number)
    c.op = Operation("rollback", failed.number)
    w.after(c, t, w.capacity.timing.rollback, "rollback_done", create=failed.kind == "create")
    for g in c.groups.values():
        if g.status != "Deleting" and failed.kind == "update":
            g.status = "Updating"


# --- Continuous mode ----------------------------------------------------------------------------------
