"""Manual holds: keep a cluster running or stopped until a time or until released."""

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
            hold=None, applied_transition_at=None, updated_at=now
        ),
        eng.entry(ref, "release", "ok"),
    )
    return True


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
