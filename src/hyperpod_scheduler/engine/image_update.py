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
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class ImageForecast:
    """What the next morning does to each group's AMI release: the one value `plan`, the dashboard and
    its API show. ``moves``: the changes it makes; ``awaiting``: changes ``approve_image`` holds until a
    person approves (unanswered, the group stays pinned); ``gaps``: groups left where they are though a
    newer release exists, and why; ``refused``: releases a group's first morning failed on, never taken
    again until ``allow-image``; ``unknown``: the release source could not be read (why)."""

    moves: tuple[ImageUpdate, ...] = ()
    awaiting: tuple[ImageUpdate, ...] = ()
    gaps: tuple[images.ImageGap, ...] = ()
    refused: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    unknown: str | None = None

    def lines(self, cluster: str) -> list[str]:
        """What a person reads, the same words in `plan` and on the dashboard."""
        out = []
        if self.moves:
            out.append(f"the next start first moves AMI releases while at zero: {images.line(self.moves)}")
        if self.awaiting:
            out.append(
                f"awaiting approval (approve_image): {images.line(self.awaiting)}; unanswered, the groups stay pinned"
            )
        if self.gaps:
            out.append(f"AMI releases kept: {images.gap_line(self.gaps)}")
        for group, releases in self.refused.items():
            out.append(
                f"{group}: AMI {', '.join(releases)} refused after a first morning failed on it; "
                f"allow it again with: hyperpod-scheduler allow-image {cluster} {group}"
            )
        if self.unknown is not None:
            out.append(f"AMI releases unknown ({self.unknown}): no group changes release")
        return out

    def for_group(self, cluster: str, group: str) -> list[str]:
        """What the next morning does to one group's release, in the words ``lines`` uses."""
        out = [images.line([u]).split(": ", 1)[1] for u in self.moves if u.group == group]
        out += [
            f"{images.line([u]).split(': ', 1)[1]}, awaiting approval (unanswered, it stays pinned)"
            for u in self.awaiting
            if u.group == group
        ]
        out += [images.gap_line([g]).split(": ", 1)[1] for g in self.gaps if g.group == group]
        if self.refused.get(group):
            out.append(
                f"AMI {', '.join(self.refused[group])} refused after a first morning failed on it; "
                f"allow it again with: hyperpod-scheduler allow-image {cluster} {group}"
            )
        return out

    def as_json(self) -> dict[str, object]:
        return {
            "image_updates": [u.model_dump() for u in self.moves],
            "image_awaiting_approval": [u.model_dump() for u in self.awaiting],
            "image_kept": [
                {
                    "group": g.group,
                    "release": g.current,
                    "status": g.status,
                    "why": g.why,
                    "newer": g.release,
                    "settles_at": None if g.settles_at is None else g.settles_at.isoformat(),
                }
                for g in self.gaps
            ],
            "image_refused": {g: list(v) for g, v in self.refused.items()},
            "image_releases_unknown": self.unknown,
        }


def forecast(
    eng: Engine,
    ref: ClusterRef,
    record: ClusterRecord | None,
    view: ClusterView,
    asleep: Collection[str] | None = None,
    start_at: datetime | None = None,
) -> ImageForecast:
    """The next start's AMI changes as the morning will decide them (``asleep``: the groups tonight's stop
    takes to zero; None: those at zero now). ``start_at``: that start, for its approvals (None: any
    approval of a start still to come)."""
    state = record.images if record is not None else ImageState()
    updates, gaps, unknown = _decide(eng, ref, record, view, asleep)
    moves, awaiting = updates, []
    if ref.settings.image.approve and updates:
        from hyperpod_scheduler.engine.image_approval import approved  # it imports the runner

        moves = approved(record, updates, start_at, eng.now())
        awaiting = [u for u in updates if u not in moves]
    refused = {g: tuple(v) for g, v in state.refused.items() if v}
    return ImageForecast(tuple(moves), tuple(awaiting), tuple(gaps), refused, unknown)


def evening(
    eng: Engine, ref: ClusterRef, record: ClusterRecord | None, view: ClusterView, asleep: Collection[str]
) -> ImageForecast:
    """The forecast the evening before. ``asleep``: the groups tonight's stop takes to zero, as the stop
    forecast (``engine.stop_forecast``: the planner and every guard, floors and ``keep`` included) says;
    never re-derived here from the capacity protections alone."""
    return forecast(eng, ref, record, view, asleep)


def wanted(
    eng: Engine,
    ref: ClusterRef,
    record: ClusterRecord | None,
    view: ClusterView,
    asleep: Collection[str] | None = None,
) -> list[ImageUpdate]:
    """The AMI changes a start of this cluster would make now; with ``asleep`` (the groups tonight's stop
    takes to zero), what `plan` shows the evening before."""
    updates, _, unknown = _decide(eng, ref, record, view, asleep)
    if unknown is not None:
        # Not knowing the releases never costs a morning: the restore goes on, pinned.
        eng.emit(ref, "note", f"{unknown}; no group changes release this time")
    return updates


def _decide(
    eng: Engine,
    ref: ClusterRef,
    record: ClusterRecord | None,
    view: ClusterView,
    asleep: Collection[str] | None,
) -> tuple[list[ImageUpdate], list[images.ImageGap], str | None]:
    state = record.images if record is not None else ImageState()
    policy = ref.settings.image
    if not policy.moves and not state.refused:
        return [], [], None
    releases: Sequence[Release] = ()
    unknown = None
    if eng.releases is not None and policy.moves:
        try:
            releases = eng.releases(ref)
        except HyperpodSchedulerError as exc:
            unknown = str(exc)
    now = eng.now()
    updates = images.plan(view, state, policy, releases, now, asleep)
    gaps = [] if unknown is not None else images.gaps(view, state, policy, releases, now, asleep)
    return updates, gaps, unknown


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
    updates, gaps, unknown = _decide(eng, ref, record, view, None)
    if unknown is not None:
        # Not knowing the releases never costs a morning: the restore goes on, pinned.
        eng.emit(ref, "note", f"{unknown}; no group changes release this time")
    if gaps:
        eng.emit(ref, "note", f"AMI releases kept: {images.gap_line(gaps)}")
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
    eng.about_to_change(ref)
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
    crashpoints.reached("after-image-taken")  # a re-run finds nothing pending: it restores, pinning the new release
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
