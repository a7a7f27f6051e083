"""A person's word on a cluster's record: a hold (keep it running or stopped until a time or until
released), and forgetting the sizes recorded at the last stop."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_scheduler.engine import planner
from hyperpod_scheduler.engine.ref import ClusterRef
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.store.errors import ConflictError
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry, Hold

if TYPE_CHECKING:
    from hyperpod_scheduler.engine.runner import Engine


def set_hold(eng: Engine, ref: ClusterRef, state: planner.State, until: datetime | None, reason: str = "") -> None:

    ref, _ = eng.identify(ref)
    now = eng.now()

    def change(rec: ClusterRecord | None) -> ClusterRecord:
        base = rec or ClusterRecord.new(ref.key, now)
        hold = Hold(state=state, until=until, by=eng.actor, reason=reason, since=now)
        return base.evolve(hold=hold, updated_at=now)

    line = eng.entry(ref, "hold", "ok", state=state, until=until.isoformat() if until else None, reason=reason)
    update(eng, ref, change, line)


def release(eng: Engine, ref: ClusterRef) -> bool:
    ref, _ = eng.identify(ref)
    now = eng.now()
    record = eng.store.get(ref.key)
    if record is None or record.hold is None:
        return False
    # The schedule resumes: the next tick applies whatever the schedule wants now.
    update(
        eng,
        ref,
        lambda rec: (rec or ClusterRecord.new(ref.key, now)).evolve(
            hold=None, applied_transition_at=None, resumed_at=now, updated_at=now
        ),
        eng.entry(ref, "release", "ok"),
    )
    return True


def forget(eng: Engine, ref: ClusterRef) -> dict[str, int] | None:
    """Drop the recorded sizes (the snapshot); the sizes that were forgotten, or None if there were none.
    Refused while an update is in flight: its outcome is still to be recorded against them."""
    ref, _ = eng.identify(ref)
    record = eng.store.get(ref.key)
    if record is None or record.snapshot is None:
        return None
    if record.pending is not None:
        raise HyperpodSchedulerError(
            f"cluster '{ref.name}': a {record.pending.action} is in flight; forget its sizes once it has settled"
        )
    sizes = {n: s.count for n, s in record.snapshot.sizes.items()}
    now = eng.now()
    update(
        eng,
        ref,
        lambda rec: (rec or ClusterRecord.new(ref.key, now)).evolve(snapshot=None, updated_at=now),
        eng.entry(ref, "forget", "ok", sizes=sizes),
    )
    return sizes


def update(
    eng: Engine, ref: ClusterRef, change: Callable[[ClusterRecord | None], ClusterRecord], line: HistoryEntry
) -> ClusterRecord:
    for _ in range(10):
        record = eng.store.get(ref.key)
        try:
            return eng.store.put(change(record), expected_version=record.version if record else None, history=[line])
        except ConflictError:
            continue
    raise HyperpodSchedulerError(f"cluster '{ref.name}': the state store kept changing; try again")


def allow_image(eng: Engine, ref: ClusterRef, group: str, release: str | None = None) -> list[str]:
    """A person says a release refused after a failed first morning may be taken again by ``group`` (one
    release, or every one refused for it). The releases allowed again; a history line names who."""
    ref, _ = eng.identify(ref)
    record = eng.store.get(ref.key)
    refused = list(record.images.refused.get(group, [])) if record is not None else []
    allowed = [r for r in refused if release is None or r == release]
    if not allowed:
        return []
    now = eng.now()

    def change(rec: ClusterRecord | None) -> ClusterRecord:
        base = rec or ClusterRecord.new(ref.key, now)
        left = {g: [r for r in v if g != group or r not in allowed] for g, v in base.images.refused.items()}
        return base.evolve(images=base.images.evolve(refused={g: v for g, v in left.items() if v}), updated_at=now)

    update(eng, ref, change, eng.entry(ref, "image", "allowed", group=group, releases=allowed))
    return allowed
