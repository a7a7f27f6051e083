"""Everything the emulator knows at one moment, and the bookkeeping every change goes through.

The world holds the clusters, the heap of scheduled changes, the capacity in use and the seeded RNG.
Changes mark their cluster dirty and queue new cluster events and node notifications; the backend
writes and publishes them after each request (so a request is one transaction).
"""

from __future__ import annotations

import heapq
from datetime import datetime, timedelta
from typing import Any

from hyperpod_scheduler.emulator.capacity import CapacityModel
from hyperpod_scheduler.emulator.model_rng import Rng
from hyperpod_scheduler.emulator.model_state import Cluster, ClusterEvent, Node, Scheduled
from hyperpod_scheduler.emulator.model_timing import Range


class World:
    def __init__(self, capacity: CapacityModel, seed: int, origin: datetime) -> None:
        self.capacity = capacity
        self.origin = origin  # capacity offsets ("+2h") count from here
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
        **metadata: Any,
    ) -> ClusterEvent:
        ev = ClusterEvent(
            event_id=self.rng.event_id(),
            time=t,
            resource_type=resource_type,
            level=level,
            description=description,
            group=group if group is not None else (node.group if node else None),
            instance_id=node.instance_id if node else None,
            metadata=metadata,
        )
        c.events.append(ev)
        self.new_events.append((c.arn, ev))
        return ev

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
    def free(self, instance_type: str, t: datetime) -> int | None:
        """Instances of this type the pool can still give at ``t`` (None: unlimited)."""
        available = self.capacity.available(instance_type, t, self.origin)
        if available is None:
            return None
        return max(0, available - self.usage.get(instance_type, 0))

    def take(self, instance_type: str, n: int = 1) -> None:
        self.usage[instance_type] = self.usage.get(instance_type, 0) + n

    def release(self, instance_type: str, n: int = 1) -> None:
        left = self.usage.get(instance_type, 0) - n
        if left > 0:
            self.usage[instance_type] = left
        else:
            self.usage.pop(instance_type, None)

    def recount_usage(self) -> None:
        self.usage = {}
        for c in self.clusters.values():
            for n in c.nodes.values():
                self.take(n.instance_type)
