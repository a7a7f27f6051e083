"""The AMI update before a morning restore: UpdateClusterSoftware while the cluster is at zero.

Crash rules, as for the stop and start (``engine.acting``):
1. The updates are stored (``ImageState.pending``, phase ``intent``) before UpdateClusterSoftware.
2. An unclear answer is never re-sent blind: the cluster is read again, and its groups' desired
   releases say whether the call went out.
3. A re-run finds the intent and decides the same way; once the cluster is InService with the
   releases applied, they become ``taken`` and the restore is planned (it pins the new release).
An AMI update that AWS refuses never costs the morning: the restore goes on, pinned.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.engine import crashpoints, images
from hyperpod_scheduler.engine.images import Release
from hyperpod_scheduler.engine.ref import ClusterRef, Result
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.store.errors import ConflictError
from hyperpod_scheduler.store.records import ClusterRecord, ImageState, ImageUpdate

if TYPE_CHECKING:
    from hyperpod_scheduler.engine.runner import Engine

Ready = tuple[ClusterRecord | None, ClusterView]


def wanted(
    eng: Engine,
    ref: ClusterRef,
    record: ClusterRecord | None,
    view: ClusterView,
    asleep: Collection[str] | None = None,
) -> list[ImageUpdate]:
    """The AMI changes a start of this cluster would make now; with ``asleep`` (the groups tonight's stop
    takes to zero), what `plan` shows the evening before."""
    state = record.images if record is not None else ImageState()
    policy = ref.settings.image
    if not policy.moves and not state.refused:
        return []
    releases: Sequence[Release] = ()
    if eng.releases is not None and policy.moves:
        try:
            releases = eng.releases(ref)
        except HyperpodSchedulerError as exc:
            # Not knowing the releases never costs a morning: the restore goes on, pinned.
            eng.emit(ref, "note", f"{exc}; no group changes release this time")
    return images.plan(view, state, policy, releases, eng.now(), asleep)


def before_start(
    eng: Engine,
    ref: ClusterRef,
    record: ClusterRecord | None,
    view: ClusterView,
    dry_run: bool,
    start_at: datetime | None = None,
) -> Result | Ready:
    """A Result: the start waits (an AMI update is settling, or its fate is unknown). Otherwise the record
    and view the restore is planned from."""
    state = record.images if record is not None else ImageState()
    if record is not None and state.pending:
        if images.applied(view, state.pending):
            if view.status != "InService":
                return _waiting(eng, ref, f"AMI update settling ({images.line(state.pending)})")
            return _taken(eng, ref, record, view, state)
        if view.status != "InService":
            return _waiting(eng, ref, f"cluster {view.status}: the AMI update waits for InService")
        # Not applied, cluster idle: it never went out (a crash before the send, or refused). Plan again.
    updates = wanted(eng, ref, record, view)
    if ref.settings.image.approve and updates:
        from hyperpod_scheduler.engine.image_approval import approved  # it imports the runner

        unasked = updates
        updates = approved(record, updates, start_at)
        if len(updates) < len(unasked):
            left = [u.group for u in unasked if u not in updates]
            eng.emit(ref, "note", f"AMI change of {', '.join(left)} not approved for this start: kept pinned")
    if not updates or view.status != "InService":
        if record is not None and state.pending and not dry_run:
            record = _store(eng, ref, record, state.evolve(pending=[], phase=None, since=None))
        return record, view
    if dry_run:
        eng.emit(ref, "dry-run", f"would update AMIs before the start: {images.line(updates)}")
        return record, view
    base = record or ClusterRecord.new(ref.key, eng.now())
    good = dict(state.good)
    for u in updates:  # where a roll-back goes, remembered before anything is sent
        if u.why != "rolled back" and u.from_release and u.from_release not in state.refused.get(u.group, ()):
            good[u.group] = u.from_release
    intent = state.evolve(pending=updates, phase="intent", since=eng.now(), good=good)
    try:
        stored = eng.store.put(
            base.evolve(images=intent, updated_at=eng.now()),
            expected_version=record.version if record else None,
        )
    except ConflictError:
        return Result(ref.name, "skip", "another runner is acting on this cluster")
    crashpoints.reached("after-image-intent")
    return _send(eng, ref, stored, view, updates)


def _send(
    eng: Engine, ref: ClusterRef, record: ClusterRecord, view: ClusterView, updates: Sequence[ImageUpdate]
) -> Result | Ready:
    try:
        eng.client(ref).update_cluster_software(**images.request(view, updates))  # type: ignore[arg-type]
    except ClientError as exc:
        err = exc.response.get("Error", {})
        answer = f"{err.get('Code', '')}: {err.get('Message', '')}"
        again = _look(eng, ref)
        if again is not None and images.applied(again, updates):
            eng.emit(ref, "note", f"UpdateClusterSoftware answered {answer}, but the releases are applied")
        elif err.get("Code") == "ConflictException":
            _store(eng, ref, record, record.images.evolve(pending=[], phase=None, since=None))
            return _waiting(eng, ref, f"UpdateClusterSoftware refused ({answer}); tried again at the next look")
        else:
            # Refused for good: the morning is not lost for it; the restore goes on with the releases pinned.
            record = _store(eng, ref, record, record.images.evolve(pending=[], phase=None, since=None))
            eng.emit(ref, "error", f"AMI update refused ({answer}); restoring on the pinned releases")
            return record, again or view
    except BotoCoreError as exc:
        again = _look(eng, ref)
        if again is None or not images.applied(again, updates):
            message = f"UpdateClusterSoftware: {exc}; whether it went out is decided at the next look"
            eng.emit(ref, "error", message)
            return Result(ref.name, "error", message)
    crashpoints.reached("after-image-send")
    _store(eng, ref, record, record.images.evolve(phase="sent"))
    eng.emit(ref, "sent", f"AMI update sent while at zero: {images.line(updates)}")
    return _waiting(eng, ref, f"AMI update sent ({images.line(updates)}); the start follows once it settles")


def _taken(eng: Engine, ref: ClusterRef, record: ClusterRecord, view: ClusterView, state: ImageState) -> Ready:
    trial = dict(state.trial)
    for u in state.pending:
        if u.why != "rolled back":  # a release it ran well on before is not on trial again
            trial[u.group] = u.to_release
    taken = [*state.taken, *state.pending]
    changes = {"pending": [], "phase": None, "since": None, "taken": taken, "trial": trial}
    record = _store(eng, ref, record, state.evolve(**changes))
    eng.emit(ref, "note", f"AMI update settled: {images.line(state.pending)}")
    return record, view


def _store(eng: Engine, ref: ClusterRef, record: ClusterRecord, state: ImageState) -> ClusterRecord:
    with contextlib.suppress(ConflictError):
        return eng.store.put(record.evolve(images=state, updated_at=eng.now()), expected_version=record.version)
    return eng.store.get(ref.key) or record


def _look(eng: Engine, ref: ClusterRef) -> ClusterView | None:
    try:
        return eng.describe(ref)
    except (ClientError, BotoCoreError):
        return None


def _waiting(eng: Engine, ref: ClusterRef, message: str) -> Result:
    eng.emit(ref, "waiting", message)
    return Result(ref.name, "waiting", message)
