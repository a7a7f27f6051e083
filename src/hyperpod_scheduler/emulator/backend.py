"""The emulator's domain model behind one entry point: ``HyperPodBackend.dispatch(operation, params)``.

Knows nothing of HTTP (the protocol layer turns requests into ``params`` and responses into JSON).
Every call first applies the scheduled changes due on the clock, in time order, then runs the
operation, then writes what changed to the state file (with the emulated now, so a restart resumes
its clock there) and tells the listeners about node changes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hyperpod_scheduler.emulator import model_api
from hyperpod_scheduler.emulator import model_operations as operations
from hyperpod_scheduler.emulator.capacity import CapacityModel
from hyperpod_scheduler.emulator.clock import Clock, RealClock, VirtualClock
from hyperpod_scheduler.emulator.errors import EmulatorError, validation
from hyperpod_scheduler.emulator.model_control import HANDLERS, arm_plan_boundaries
from hyperpod_scheduler.emulator.model_images import Catalogue, ImageRelease, next_version, release_from_dict
from hyperpod_scheduler.emulator.model_plans import TrainingPlan, plan_from_dict
from hyperpod_scheduler.emulator.model_rng import Rng
from hyperpod_scheduler.emulator.model_state import Cluster
from hyperpod_scheduler.emulator.model_timing import moment
from hyperpod_scheduler.emulator.model_world import OMITTED_MEMBERS, World
from hyperpod_scheduler.emulator.persistence import StateStore
from hyperpod_scheduler.errors import UsageError

log = logging.getLogger(__name__)

Listener = Callable[[dict[str, Any]], None]


class HyperPodBackend:
    def __init__(
        self,
        clock: Clock,
        capacity: CapacityModel | None = None,
        seed: int = 0,
        state_path: str | Path | None = None,
        omitted_members: str = "keep",
    ) -> None:
        if omitted_members not in OMITTED_MEMBERS:
            raise UsageError(f"omitted_members must be one of {', '.join(OMITTED_MEMBERS)}, got {omitted_members!r}")
        self.clock = clock
        self.seed = seed
        self.omitted_members = omitted_members
        self._capacity = capacity or CapacityModel.default()
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self._store = StateStore(state_path) if state_path is not None else None
        self._world = World(self._capacity, seed, clock.now(), omitted_members)
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
        """When the next scheduled change (or AMI release) happens, for a driver that jumps the clock."""
        with self._lock:
            w = self._world
            times = [t for t in (w.next_time(), w.catalogue().next_time(self.clock.now(), w.origin)) if t is not None]
            return min(times) if times else None

    # --- administration -------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget every cluster (and the state file's contents); keeps clock, capacity and seed."""
        with self._lock:
            self._world = World(self._capacity, self.seed, self.clock.now(), self.omitted_members)
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
            self._world.reconfigured()
            self._rearm_plans()
            notes = self._commit(force_meta=True)
        self._publish(notes)

    # --- the AMI catalogue ----------------------------------------------------------------------
    def release_image(
        self, version: str | None = None, image_id: str | None = None, *, security_update: bool = False
    ) -> ImageRelease:
        """AWS releases a new HyperPod AMI now: it becomes "latest" (``version`` defaults to the next
        patch release). Groups that omit ImageReleaseVersion get it from their next request on."""
        with self._lock:
            self._process(self.clock.now())
            w = self._world
            raw: dict[str, Any] = {"version": version or next_version(w.catalogue().releases)}
            if image_id is not None:
                raw["image_id"] = image_id
            if security_update:
                raw["security_update"] = True
            release = release_from_dict(raw, "release")
            release = ImageRelease(release.version, release.image_id, self.clock.now(), None, security_update)
            catalogue = w.catalogue()
            newest = catalogue.releases[-1] if catalogue.releases else None
            if newest is not None and release.key <= newest.key:
                raise UsageError(f"release: version {release.version} is not newer than {newest.version}")
            if catalogue.by_image(release.image_id) is not None:
                raise UsageError(f"release: image {release.image_id} already belongs to another version")
            w.images_added.append(release)
            w.reconfigured()
            notes = self._commit(force_meta=True)
        self._publish(notes)
        return release

    def images(self) -> list[dict[str, Any]]:
        """The catalogue as of now: every release with its image id, whether it is out, and latest."""
        with self._lock:
            w, now = self._world, self.clock.now()
            catalogue = w.catalogue()
            latest = catalogue.latest(now, w.origin)
            return [
                {
                    "version": r.version,
                    "image_id": r.image_id,
                    "released": r.released(now, w.origin),
                    "released_at": _iso(moment(r.released_at, r.released_offset, w.origin)),
                    "latest": latest is not None and r.version == latest.version,
                    "security_update": r.security_update,
                    "end_of_life": r.ended(now, w.origin),
                }
                for r in catalogue.releases
            ]

    def latest_image(self) -> str | None:
        with self._lock:
            latest = self._world.catalogue().latest(self.clock.now(), self._world.origin)
            return latest.version if latest else None

    # --- training plans -------------------------------------------------------------------------
    def add_training_plan(self, name: str, spec: dict[str, Any]) -> TrainingPlan:
        """Add a training plan (the capacity file's ``training_plans.NAME`` form); offsets count from now."""
        with self._lock:
            self._process(self.clock.now())
            w = self._world
            plan = plan_from_dict(name, spec, f"training_plans.{name}")
            plan = _anchored(plan, self.clock.now())
            if plan.arn in w.plans():
                raise UsageError(f"training_plans.{name}: a plan named {name} already exists in {plan.region}")
            w.plans_added.append(plan)
            w.reconfigured()
            notes = self._commit(force_meta=True)
        self._publish(notes)
        return plan

    def training_plans(self) -> list[dict[str, Any]]:
        with self._lock:
            w, now = self._world, self.clock.now()
            return [
                {
                    "name": p.name,
                    "arn": p.arn,
                    "status": p.status(now, w.origin),
                    "start": p.start(w.origin),
                    "end": p.end(w.origin),
                    "instance_types": sorted(p.instance_types()),
                    "in_use": sum(n for (arn, _), n in w.plan_usage.items() if arn == p.arn),
                }
                for p in w.plans().values()
            ]

    def _rearm_plans(self) -> None:
        now = self.clock.now()
        for c in self._world.clusters.values():
            arm_plan_boundaries(self._world, c, now)

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
        """Write the emulated now (so a new run on the same file resumes its clock here) and close."""
        with self._lock:
            if self._store is not None:
                self._store.save([], [], [], self._meta())
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
            out = handler(self._world, now, params, account, region)
            for arn in self._world.dirty:
                c = self._world.clusters.get(arn)
                if c is not None:
                    operations.refresh(c, now)
            return out
        except (KeyError, TypeError, ValueError) as exc:
            # The protocol layer validates against the model first; this is the safety net for
            # direct callers that skip it. Operations check everything before they change anything.
            raise validation(f"{operation}: malformed request ({type(exc).__name__}: {exc})") from exc

    def _process(self, now: datetime) -> None:
        w = self._world
        while (due := w.pop_due(now)) is not None:
            cluster, change = due
            HANDLERS[change.kind](w, cluster, change.time, change.args)
            operations.refresh(cluster, change.time)

    def _meta(self) -> dict[str, Any]:
        w = self._world
        return {
            "seed": self.seed,
            "rng_counter": w.rng.counter,
            "seq": w.seq,
            "origin": w.origin,
            "fail_next": w.fail_next,
            "now": self.clock.now(),
            "images": [r.to_dict() for r in w.images_added],
            "training_plans": [p.to_dict() for p in w.plans_added],
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
        w.images_added = [ImageRelease.from_dict(r) for r in meta.get("images") or []]
        w.plans_added = [TrainingPlan.from_dict(p) for p in meta.get("training_plans") or []]
        w.reconfigured()
        Catalogue([*w.capacity.images, *w.images_added])  # a capacity file naming a stored version twice
        saved_now = meta.get("now")
        if isinstance(saved_now, datetime):
            _resume_clock(self.clock, saved_now)
        events = store.events()
        for data in store.clusters():
            c = Cluster.from_dict(data)
            c.events = events.get(c.arn, [])
            w.clusters[c.arn] = c
            w.by_name[(c.account, c.region, c.name)] = c.arn
        w.rebuild_heap()
        w.recount_usage()


def _resume_clock(clock: Clock, saved: datetime) -> None:
    """Go on from where the last run stopped: never start behind what it already scheduled."""
    if isinstance(clock, VirtualClock):
        if saved > clock.now():
            clock.set(saved)
    elif isinstance(clock, RealClock):
        clock.resume_from(saved)


def _anchored(plan: TrainingPlan, now: datetime) -> TrainingPlan:
    """Offsets in a plan added at run time count from that moment, not from the emulator's origin."""
    blocks = tuple(
        replace(
            b,
            start_at=b.start_at or now + timedelta(seconds=b.start_offset or 0.0),
            start_offset=None,
            end_at=b.end_at or now + timedelta(seconds=b.end_offset or 0.0),
            end_offset=None,
        )
        for b in plan.blocks
    )
    return replace(plan, blocks=blocks)


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when is not None else None
