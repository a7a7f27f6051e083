"""The emulator's domain model behind one entry point: ``HyperPodBackend.dispatch(operation, params)``.

Knows nothing of HTTP (the protocol layer turns requests into ``params`` and responses into JSON).
Every call first applies the scheduled changes due on the clock, in time order, then runs the
operation, then writes what changed to the state file and tells the listeners about node changes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from hyperpod_scheduler.emulator import model_api
from hyperpod_scheduler.emulator.capacity import CapacityModel
from hyperpod_scheduler.emulator.clock import Clock
from hyperpod_scheduler.emulator.errors import EmulatorError, validation
from hyperpod_scheduler.emulator.model_control import HANDLERS
from hyperpod_scheduler.emulator.model_rng import Rng
from hyperpod_scheduler.emulator.model_state import Cluster
from hyperpod_scheduler.emulator.model_world import World
from hyperpod_scheduler.emulator.persistence import StateStore

log = logging.getLogger(__name__)

Listener = Callable[[dict[str, Any]], None]


class HyperPodBackend:
    def __init__(
        self,
        clock: Clock,
        capacity: CapacityModel | None = None,
        seed: int = 0,
        state_path: str | Path | None = None,
    ) -> None:
        self.clock = clock
        self.seed = seed
        self._capacity = capacity or CapacityModel.default()
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self._store = StateStore(state_path) if state_path is not None else None
        self._world = World(self._capacity, seed, clock.now())
        if self._store is not None:
            self._load(self._store)

    # --- the API -------------------------------------------------------------------------------
    def dispatch(
        self,
        operation: str,
        params: dict[str, Any],
        *,
        region: str = "us-east-1",
        account: str = "123456789012",
    ) -> dict[str, Any]:
        handler = model_api.OPERATIONS.get(operation)
        if handler is None:
            raise EmulatorError("UnknownOperationException", f"Unknown operation {operation}", 400)
        notes: list[dict[str, Any]] = []
        try:
            with self._lock:
                now = self.clock.now()
                try:
                    self._process(now)
                    return self._call(operation, handler, now, params, account, region)
                finally:
                    notes = self._commit()
        finally:
            self._publish(notes)

    # --- time -------------------------------------------------------------------------------------
    def process_due(self) -> None:
        """Apply every scheduled change due now, without a request."""
        notes: list[dict[str, Any]] = []
        try:
            with self._lock:
                try:
                    self._process(self.clock.now())
                finally:
                    notes = self._commit()
        finally:
            self._publish(notes)

    def next_event_time(self) -> datetime | None:
        with self._lock:
            return self._world.next_time()

    # --- administration -------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget every cluster (and the state file's contents); keeps clock, capacity and seed."""
        with self._lock:
            self._world = World(self._capacity, self.seed, self.clock.now())
            if self._store is not None:
                self._store.clear()
                self._save_all()

    def set_capacity(self, model: CapacityModel) -> None:
        """Swap the capacity model; its offsets count from now and its injected failures restart."""
        with self._lock:
            self._process(self.clock.now())
            self._capacity = model
            self._world.capacity = model
            self._world.origin = self.clock.now()
            self._world.fail_next = dict(model.fail_next_launches)
            notes = self._commit(force_meta=True)
        self._publish(notes)

    @property
    def capacity(self) -> CapacityModel:
        return self._capacity

    def add_listener(self, fn: Listener) -> None:
        """``fn(event)`` is called, outside the lock, for every node state change."""
        with self._lock:
            self._listeners.append(fn)

    def usage(self) -> dict[str, int]:
        """Instances of each type holding capacity now (launching, running or shutting down)."""
        with self._lock:
            return dict(self._world.usage)

    def lifecycle_starts(
        self, cluster: str, *, region: str = "us-east-1", account: str = "123456789012"
    ) -> dict[str, datetime | None]:
        """When lifecycle setup (and so billing) started on each node of a cluster."""
        with self._lock:
            c = model_api.find_cluster(self._world, cluster, account, region)
            return {n.instance_id: n.lifecycle_start for n in c.nodes.values()}

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    # --- internals --------------------------------------------------------------------------------
    def _call(
        self,
        operation: str,
        handler: model_api.Operation,
        now: datetime,
        params: dict[str, Any],
        account: str,
        region: str,
    ) -> dict[str, Any]:
        try:
            return handler(self._world, now, params, account, region)
        except (KeyError, TypeError, ValueError) as exc:
            # The protocol layer validates against the model first; this is the safety net for
            # direct callers that skip it. Operations check everything before they change anything.
            raise validation(f"{operation}: malformed request ({type(exc).__name__}: {exc})") from exc

    def _process(self, now: datetime) -> None:
        w = self._world
        while (due := w.pop_due(now)) is not None:
            cluster, change = due
            HANDLERS[change.kind](w, cluster, change.time, change.args)

    def _meta(self) -> dict[str, Any]:
        w = self._world
        return {
            "seed": self.seed,
            "rng_counter": w.rng.counter,
            "seq": w.seq,
            "origin": w.origin,
            "fail_next": w.fail_next,
        }

    def _commit(self, force_meta: bool = False) -> list[dict[str, Any]]:
        w = self._world
        if self._store is not None and (w.dirty or w.removed or w.new_events or force_meta):
            events = [(arn, ev) for arn, ev in w.new_events if arn not in w.removed]
            self._store.save(
                [(arn, w.clusters[arn].to_dict()) for arn in w.dirty if arn in w.clusters],
                w.removed,
                events,
                self._meta(),
            )
        w.dirty.clear()
        w.removed.clear()
        w.new_events.clear()
        notes, w.notes = w.notes, []
        return notes

    def _publish(self, notes: list[dict[str, Any]]) -> None:
        if not notes or not self._listeners:
            return
        for fn in list(self._listeners):
            for note in notes:
                try:
                    fn(note)
                except Exception:  # a listener must not break the control plane
                    log.exception("emulator listener failed on %s", note)

    def _save_all(self) -> None:
        w = self._world
        w.dirty.update(w.clusters)
        self._commit(force_meta=True)

    def _load(self, store: StateStore) -> None:
        meta = store.meta()
        if not meta:
            self._save_all()
            return
        w = self._world
        self.seed = int(meta.get("seed", self.seed))
        w.rng = Rng(self.seed, int(meta.get("rng_counter", 0)))
        w.seq = int(meta.get("seq", 0))
        origin = meta.get("origin")
        if isinstance(origin, datetime):
            w.origin = origin
        w.fail_next = {str(k): int(v) for k, v in (meta.get("fail_next") or {}).items()}
        events = store.events()
        for data in store.clusters():
            c = Cluster.from_dict(data)
            c.events = events.get(c.arn, [])
            w.clusters[c.arn] = c
            w.by_name[(c.account, c.region, c.name)] = c.arn
        w.rebuild_heap()
        w.recount_usage()
