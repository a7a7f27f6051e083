"""Continuous provisioning mode: controller first, partial groups that retry, the MinInstanceCount rule.

The cluster is InService once the controller (and a login node, if any) runs; groups short of
capacity launch what the pool gives and retry on a timer until CurrentCount reaches TargetCount;
a MinInstanceCount not met within three hours rolls the group back.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hyperpod_scheduler.emulator import model_nodes as nodes
from hyperpod_scheduler.emulator.model_state import Cluster, Group, Node
from hyperpod_scheduler.emulator.model_world import World

CAPACITY_FAILURE = "We currently do not have sufficient capacity for the requested instance type(s). Please try again."
WARN_EVERY = timedelta(hours=1)  # repeat an unchanged capacity warning at most this often


def capacity_warning(instance_type: str) -> str:
    return f"We currently do not have sufficient capacity to launch new {instance_type} instances. Please try again."


def plan_of(g: Group) -> str | None:
    plan = g.spec.get("TrainingPlanArn")
    return plan if isinstance(plan, str) else None


def plan_warning(w: World, arn: str, instance_type: str, t: datetime) -> str:
    plan = w.plans().get(arn)
    if plan is None:
        return f"Training plan {arn} not found"
    return (
        f"Training plan {plan.name} is {plan.status(t, w.origin)} and has no free {instance_type} capacity. "
        "Nodes launch when its reserved capacity is Active."
    )


def live_groups(c: Cluster) -> list[Group]:
    return [g for g in c.groups.values() if g.status not in ("Deleting", "Failed")]


def launch_order(c: Cluster) -> list[Group]:
    rank = {"Controller": 0, "Login": 1}
    return sorted(live_groups(c), key=lambda g: rank.get(g.node_type or "", 2))


def continuous_start(w: World, c: Cluster, t: datetime) -> None:
    assert c.op is not None
    op = c.op.number
    for g in launch_order(c):
        launched = fill(w, c, g, t, op)
        g.wave = [n.instance_id for n in launched]
        if g.node_type == "Controller" and not launched and g.target > 0:
            fail_continuous(w, c, t, CAPACITY_FAILURE)
            return
        arm_min_check(w, c, g, t)
    for g in live_groups(c):
        group_progress(w, c, g, t)
    continuous_cluster_progress(w, c, t)


def fail_continuous(w: World, c: Cluster, t: datetime, message: str) -> None:
    c.status = "Failed"
    c.failure_message = message
    c.op = None
    w.cancel(c, keep=("node_gone",))
    for g in c.groups.values():
        g.status = "Failed"
        g.retry_pending = False
    for n in list(c.nodes.values()):
        nodes.shut_down(w, c, n, t, "cluster creation failed")
    w.event(c, t, "Error", "Cluster", f"Cluster creation failed: {message}", FailureMessage=message)


def continuous_cluster_progress(w: World, c: Cluster, t: datetime) -> None:
    if c.status != "Creating":
        return
    needed = [g for g in live_groups(c) if g.node_type in ("Controller", "Login") and g.target > 0]
    if needed:
        ready = all(c.running(g.name) >= 1 for g in needed)
    else:
        ready = all(g.status != "Creating" for g in live_groups(c))
    if ready:
        c.status = "InService"
        c.op = None
        w.event(c, t, "Info", "Cluster", "Cluster is InService")


def fill(w: World, c: Cluster, g: Group, t: datetime, op: int) -> list[Node]:
    """Launch what the group lacks, as far as the pool allows; retry later for the rest."""
    want = g.target - c.active(g.name)
    if want <= 0:
        g.last_short = 0
        return []
    plan = plan_of(g)
    free = w.free(g.instance_type, t, plan)
    k = want if free is None else min(want, free)
    injected = min(k, w.fail_next.get(g.instance_type, 0))
    if injected:
        w.fail_next[g.instance_type] -= injected
        k -= injected
    launched = [nodes.launch(w, c, g, t, op) for _ in range(k)]
    short = want - k
    if short:
        if short != g.last_short or g.last_warn is None or t - g.last_warn >= WARN_EVERY:
            text = capacity_warning(g.instance_type) if plan is None else plan_warning(w, plan, g.instance_type, t)
            w.event(
                c,
                t,
                "Warn",
                "InstanceGroup",
                text,
                group=g.name,
                InstanceGroupScaling={
                    "InstanceCount": c.running(g.name),
                    "TargetCount": g.target,
                    "MinCount": g.min_count or 0,
                    "FailureMessage": text,
                },
            )
            g.last_warn = t
        g.last_short = short
        ensure_retry(w, c, g, t)
    else:
        g.last_short = 0
    return launched


def ensure_retry(w: World, c: Cluster, g: Group, t: datetime) -> None:
    if not g.retry_pending:
        g.retry_pending = True
        w.after(c, t, w.capacity.timing.retry_interval, "retry", group=g.name)


def arm_min_check(w: World, c: Cluster, g: Group, t: datetime) -> None:
    if (g.min_count or 0) > c.running(g.name):
        g.min_token += 1
        w.after(c, t, w.capacity.timing.min_count_timeout, "min_check", group=g.name, token=g.min_token)


def group_progress(w: World, c: Cluster, g: Group, t: datetime) -> None:
    """Continuous group status: Creating until its first wave settled and its minimum runs."""
    running = c.running(g.name)
    minimum = g.min_count or 0
    if g.status == "Creating":
        wave_busy = any(c.nodes[i].settling for i in g.wave if i in c.nodes)
        if not wave_busy and running >= minimum:
            g.status = "InService"
            w.event(c, t, "Info", "InstanceGroup", f"Instance group {g.name} is InService", group=g.name)
    elif g.status == "Degraded" and running >= minimum:
        g.status = "InService"
    if running >= g.target and g.status == "InService":
        g.stable_target, g.stable_min = g.target, g.min_count
        g.wave = []


def min_check_pending(c: Cluster, g: Group) -> bool:
    return any(
        s.kind == "min_check" and s.args.get("group") == g.name and s.args.get("token") == g.min_token
        for s in c.pending.values()
    )


def remember_stable(c: Cluster, g: Group) -> None:
    """Before a Continuous change, keep the group's current values as the MinInstanceCount fallback.

    Only values whose minimum was met count as "last InService values"; while an earlier change is
    still on its three-hour clock, the fallback from before that change stands.
    """
    met = c.running(g.name) >= (g.min_count or 0)
    if met and g.status in ("InService", "Degraded") and not min_check_pending(c, g):
        g.stable_target, g.stable_min = g.target, g.min_count
