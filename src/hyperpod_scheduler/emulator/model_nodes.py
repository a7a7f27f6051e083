"""A node's life (launch, provisioning, lifecycle setup by tier, health checks, running, gone) and scale-in.

Each phase ends with a scheduled ``phase_done`` change and is recorded as a cluster event. Capacity is
held from launch until the instance is gone; billing (``lifecycle_start``) starts with lifecycle setup.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hyperpod_scheduler.emulator import model_operations as operations
from hyperpod_scheduler.emulator.model_rules import TIER_AMI, TIER_CUSTOM, TIER_EXTENSION, lifecycle_tier
from hyperpod_scheduler.emulator.model_state import PHASE_MESSAGE, SCRIPT_PHASES, Cluster, Group, Node
from hyperpod_scheduler.emulator.model_world import World

LIFECYCLE_FAILURE = (
    "Lifecycle scripts did not run successfully. Please check the lifecycle script logs in CloudWatch for details."
)


def plan_phases(w: World, spec: dict[str, Any], instance_type: str) -> tuple[list[tuple[str, float]], int | None]:
    """The phases a new node of this group goes through, and which one (if any) will fail."""
    timing = w.capacity.timing
    phases: list[tuple[str, float]] = [("provisioning", w.jitter(timing.provisioning))]
    tier = lifecycle_tier(spec)
    if tier == TIER_CUSTOM:
        phases.append(("custom-scripts", w.jitter(timing.custom_scripts)))
    else:
        assert tier in (TIER_AMI, TIER_EXTENSION)
        phases.append(("ami-setup", w.jitter(timing.ami_setup)))
        if tier == TIER_EXTENSION:
            phases.append(("extension-script", w.jitter(timing.extension_script)))
    if spec.get("OnStartDeepHealthChecks"):
        # After lifecycle setup (the node is then DeepHealthCheckInProgress); how long depends on
        # the family: DCGM level 4 and NCCL on 8-GPU hosts take longest.
        phases.append(("deep-health-check", w.jitter(timing.health_check(instance_type))))
    fail_phase = None
    rate = w.capacity.lifecycle_script_failure_rate
    if rate > 0:
        script = [i for i, (name, _) in enumerate(phases) if name in SCRIPT_PHASES]
        if script and w.rng.random() < rate:
            fail_phase = script[0]
    return phases, fail_phase


def launch(w: World, c: Cluster, g: Group, t: datetime, op: int) -> Node:
    phases, fail_phase = plan_phases(w, g.spec, g.instance_type)
    logical_id = None
    if c.continuous:
        logical_id = g.logical_queue.pop(0) if g.logical_queue else w.rng.event_id()
    node = Node(
        instance_id=w.rng.instance_id(),
        group=g.name,
        instance_type=g.instance_type,
        launch_time=t,
        phases=phases,
        phase=phases[0][0],
        logical_id=logical_id,
        fail_phase=fail_phase,
        message=PHASE_MESSAGE[phases[0][0]],
        private_ip=w.rng.private_ip(),
        op=op,
        image_version=g.image_version,  # a node runs the release its group wants when it launches
        image_id=g.image_id,
        plan=g.spec.get("TrainingPlanArn"),
        scaling_op=g.scaling_op,
    )
    c.nodes[node.instance_id] = node
    w.take(node)
    w.schedule(c, t + timedelta(seconds=phases[0][1]), "phase_done", node=node.instance_id)
    w.event(
        c,
        t,
        "Info",
        "Instance",
        f"Launching a new {node.instance_type} instance",
        node=node,
        NodeLogicalId=logical_id,
        LcsExecutionState="Pending",
    )
    w.note_node(c, node, t)
    return node


def advance(w: World, c: Cluster, node: Node, t: datetime) -> str:
    """End the node's current phase; returns ``next``, ``running`` or ``failed``."""
    if node.fail_phase == node.phase_index:
        node.failed = True
        node.message = LIFECYCLE_FAILURE
        w.event(
            c,
            t,
            "Error",
            "Instance",
            f"Lifecycle script failed on {node.instance_id} during {node.phase}",
            node=node,
            FailureMessage=LIFECYCLE_FAILURE,
            LcsExecutionState="Failed",
        )
        w.note_node(c, node, t)
        return "failed"
    node.phase_index += 1
    if node.phase_index < len(node.phases):
        name, seconds = node.phases[node.phase_index]
        node.phase = name
        node.message = PHASE_MESSAGE[name]
        if node.phase_index == 1:
            node.lifecycle_start = t
        if name == "deep-health-check":
            operations.health_checks_started(w, c, node, t)
        w.schedule(c, t + timedelta(seconds=seconds), "phase_done", node=node.instance_id)
        w.event(
            c,
            t,
            "Info",
            "Instance",
            f"{PHASE_MESSAGE[name]} on {node.instance_id}",
            node=node,
            LcsExecutionState="InProgress" if name != "deep-health-check" else "Complete",
        )
        w.note_node(c, node, t)
        return "next"
    node.phase = "running"
    node.message = ""
    g = c.groups.get(node.group)
    if g is not None:
        g.ran_version, g.ran_image_id = node.image_version, node.image_id
    w.event(
        c, t, "Info", "Instance", f"Instance {node.instance_id} is running", node=node, LcsExecutionState="Complete"
    )
    w.note_node(c, node, t)
    return "running"


def shut_down(w: World, c: Cluster, node: Node, t: datetime, reason: str) -> None:
    if node.phase == "shutting-down":
        return
    node.phase = "shutting-down"
    node.message = reason
    w.after(c, t, w.capacity.timing.shutdown, "node_gone", node=node.instance_id)
    w.event(c, t, "Info", "Instance", f"Terminating instance {node.instance_id}: {reason}", node=node)
    w.note_node(c, node, t)


def remove(w: World, c: Cluster, node: Node, t: datetime) -> None:
    c.nodes.pop(node.instance_id, None)
    w.release(node)
    w.event(c, t, "Info", "Instance", f"Instance {node.instance_id} terminated", node=node)
    w.note_node(c, node, t, gone=True)


def scale_in_order(nodes: list[Node]) -> list[Node]:
    """Which nodes go first at scale-in: those still launching, then the newest running ones."""
    return sorted(
        (n for n in nodes if n.active and not n.draining),
        key=lambda n: (n.phase == "running", -n.launch_time.timestamp(), n.instance_id),
    )


def shrink(w: World, c: Cluster, g: Group, t: datetime) -> None:
    for n in c.group_nodes(g.name):
        if n.draining:
            shut_down(w, c, n, t, "scale-in")
    extra = c.active(g.name) - g.target
    if extra > 0:
        for n in scale_in_order(c.group_nodes(g.name))[:extra]:
            shut_down(w, c, n, t, "scale-in")


def drop_group(w: World, c: Cluster, g: Group, t: datetime) -> None:
    c.groups.pop(g.name, None)
    w.event(c, t, "Info", "InstanceGroup", f"Instance group {g.name} deleted", group=g.name)
