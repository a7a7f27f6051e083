"""Everything the emulator knows at one moment, and the bookkeeping every change goes through.

The world holds the clusters, the heap of scheduled changes, the capacity in use and the seeded RNG.
Changes mark their cluster dirty and queue new cluster events and node notifications; the backend
writes and publishes them after each request (so a request is one transaction).
"""

from __future__ import annotations

import heapq
from datetime import datetime, timedelta
from typing import Any, TypeVar

from hyperpod_scheduler.emulator.capacity import CapacityModel
from hyperpod_scheduler.emulator.model_images import Catalogue, ImageRelease
from hyperpod_scheduler.emulator.model_plans import TrainingPlan
from hyperpod_scheduler.emulator.model_rng import Rng
from hyperpod_scheduler.emulator.model_state import Cluster, ClusterEvent, Node, Scheduled
from hyperpod_scheduler.emulator.model_timing import Range

K = TypeVar("K")

KEEP = "keep"
RESET = "reset"
OMITTED_MEMBERS = (KEEP, RESET)


class World:
    def __init__(self, capacity: CapacityModel, seed: int, origin: datetime, omitted_members: str = KEEP) -> None:
        self.capacity = capacity
        self.origin = origin  # capacity offsets ("+2h") count from here
        # What UpdateCluster does with an optional member an existing group's entry leaves out:
        # "keep" its value (the emulator's default assumption) or "reset" it to its default.
        self.omitted_members = omitted_members
        self.images_added: list[ImageRelease] = []  # AMI releases added at run time (persisted)
        self.plans_added: list[TrainingPlan] = []  # training plans added at run time (persisted)
        self._catalogue: Catalogue | None = None
        self._plans: dict[str, TrainingPlan] | None = None
        self.plan_usage: dict[tuple[str, str], int] = {}  # (plan ARN, instance type) -> nodes holding it
        self.rng = Rng(seed)
        self.clusters: dict[str, Cluster] = {}  # by ARN
        self.by_name: dict[tuple[str, str, str], str] = {}  # (account, region, name) -> ARN
        self.heap: list[tuple[datetime, int, str]] = []  # (time, seq, cluster ARN)
        self.seq = 0
        self.usage: dict[str, int] = {}  # instance type -> instances holding capacity
        self.fail_next: dict[str, int] = dict(capacity.fail_next_launches)
        self.dirty: set[str] = set()
        self.removed: set[str] = set()
        self.new_events: list[tuple[str, ClusterEvent]] = []
        self.notes: list[dict[str, Any]] = []

    # --- the AMI catalogue and training plans ------------------------------------------------------
    def catalogue(self) -> Catalogue:
        if self._catalogue is None:
            self._catalogue = Catalogue([*self.capacity.images, *self.images_added])
        return self._catalogue

    def plans(self) -> dict[str, TrainingPlan]:
        if self._plans is None:
            self._plans = {p.arn: p for p in [*self.capacity.training_plans, *self.plans_added]}
        return self._plans

    def reconfigured(self) -> None:
        """The capacity model or the run-time additions changed: forget what was derived from them."""
        self._catalogue = None
        self._plans = None

    # --- time and scheduling -------------------------------------------------------------------
    def jitter(self, r: Range) -> float:
        return self.rng.uniform(r[0], r[1])

    def schedule(self, c: Cluster, at: datetime, kind: str, **args: Any) -> int:
        self.seq += 1
        c.pending[self.seq] = Scheduled(at, kind, args)
        heapq.heappush(self.heap, (at, self.seq, c.arn))
        self.touch(c)
        return self.seq

    def after(self, c: Cluster, t: datetime, r: Range, kind: str, **args: Any) -> datetime:
        at = t + timedelta(seconds=self.jitter(r))
        self.schedule(c, at, kind, **args)
        return at

    def cancel(self, c: Cluster, keep: tuple[str, ...] = ()) -> None:
        """Drop a cluster's scheduled changes except the kinds in ``keep`` (heap entries lapse)."""
        c.pending = {seq: s for seq, s in c.pending.items() if s.kind in keep}
        self.touch(c)

    def next_time(self) -> datetime | None:
        while self.heap:
            at, seq, arn = self.heap[0]
            c = self.clusters.get(arn)
            if c is not None and seq in c.pending:
                return at
            heapq.heappop(self.heap)  # cancelled or its cluster is gone
        return None

    def pop_due(self, now: datetime) -> tuple[Cluster, Scheduled] | None:
        while self.heap and self.heap[0][0] <= now:
            _, seq, arn = heapq.heappop(self.heap)
            c = self.clusters.get(arn)
            if c is None or seq not in c.pending:
                continue
            self.touch(c)
            return c, c.pending.pop(seq)
        return None

    def rebuild_heap(self) -> None:
        self.heap = [(s.time, seq, c.arn) for c in self.clusters.values() for seq, s in c.pending.items()]
        heapq.heapify(self.heap)
        self.seq = max([self.seq, *(seq for _, seq, _ in self.heap)])

    # --- records ------------------------------------------------------------------------------
    def touch(self, c: Cluster) -> None:
        self.dirty.add(c.arn)

    def add_cluster(self, c: Cluster) -> None:
        self.clusters[c.arn] = c
        self.by_name[(c.account, c.region, c.name)] = c.arn
        self.touch(c)

    def remove_cluster(self, c: Cluster) -> None:
        self.clusters.pop(c.arn, None)
        if self.by_name.get((c.account, c.region, c.name)) == c.arn:
            del self.by_name[(c.account, c.region, c.name)]
        self.dirty.discard(c.arn)
        self.removed.add(c.arn)

    def event(
        self,
        c: Cluster,
        t: datetime,
        level: str,
        resource_type: str,
        description: str,
        group: str | None = None,
        node: Node | None = None,
        operation: str | None = None,
        **metadata: Any,
    ) -> None:
        """Record a cluster event. Events exist only in Continuous mode (ListClusterEvents is
        documented as Continuous-only), so other clusters record nothing."""
        if not c.continuous:
            return
        group_name = group if group is not None else (node.group if node else None)
        if operation is None:
            # Events about a node or a group carry the operation working on it, as AWS's do.
            if node is not None:
                operation = node.check_op if node.phase == "deep-health-check" else node.scaling_op
            elif group_name is not None and group_name in c.groups:
                operation = c.groups[group_name].scaling_op
        ev = ClusterEvent(
            event_id=self.rng.event_id(),
            time=t,
            resource_type=resource_type,
            level=level,
            description=description,
            group=group_name,
            instance_id=node.instance_id if node else None,
            metadata=metadata,
            operation_id=operation,
        )
        c.events.append(ev)
        self.new_events.append((c.arn, ev))

    def note_node(self, c: Cluster, node: Node, t: datetime, gone: bool = False) -> None:
        """Queue a node state change for the listeners (a later Slurm integration)."""
        self.notes.append(
            {
                "type": "node",
                "time": t,
                "account": c.account,
                "region": c.region,
                "cluster_arn": c.arn,
                "cluster_name": c.name,
                "instance_group": node.group,
                "instance_id": node.instance_id,
                "node_logical_id": node.logical_id,
                "instance_type": node.instance_type,
                "status": "Gone" if gone else node.status,
                "phase": "gone" if gone else node.phase,
            }
        )

    # --- capacity -------------------------------------------------------------------------------
    def free(self, instance_type: str, t: datetime, plan: str | None = None) -> int | None:
        """Instances of this type the pool (or the training plan's Active blocks) can still give at
        ``t`` (None: unlimited)."""
        if plan is not None:
            p = self.plans().get(plan)
            reserved = p.active_count(instance_type, t, self.origin) if p is not None else 0
            return max(0, reserved - self.plan_usage.get((plan, instance_type), 0))
        available = self.capacity.available(instance_type, t, self.origin)
        if available is None:
            return None
        return max(0, available - self.usage.get(instance_type, 0))

    def take(self, node: Node) -> None:
        if node.plan is not None:
            key = (node.plan, node.instance_type)
            self.plan_usage[key] = self.plan_usage.get(key, 0) + 1
        else:
            self.usage[node.instance_type] = self.usage.get(node.instance_type, 0) + 1

    def release(self, node: Node) -> None:
        if node.plan is not None:
            _decrement(self.plan_usage, (node.plan, node.instance_type))
        else:
            _decrement(self.usage, node.instance_type)

    def recount_usage(self) -> None:
        self.usage = {}
        self.plan_usage = {}
        for c in self.clusters.values():
            for n in c.nodes.values():
                self.take(n)


def _decrement(counts: dict[K, int], key: K) -> None:
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)
