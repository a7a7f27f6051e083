"""Approval of an AMI change (``approve_image: true``): the evening before, the notification carries the
same single-use link as a release approval (``engine.approvals``); the change the next start would make
goes out only if a person approved it. Unanswered or refused, the groups stay pinned. Going back to a
release a group ran well on (``rolled back``) needs no approval."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from hyperpod_scheduler.engine import image_update, images
from hyperpod_scheduler.engine.approvals import DEFAULT_APPROVAL_MINUTES, ask
from hyperpod_scheduler.engine.runner import ClusterRef, Engine
from hyperpod_scheduler.engine.slurm_roles import stop_roles
from hyperpod_scheduler.engine.stop_forecast import forecast
from hyperpod_scheduler.schedule import Schedule
from hyperpod_scheduler.store.records import Approval, ClusterRecord, ImageUpdate


def ask_if_due(
    engine: Engine, ref: ClusterRef, schedule: Schedule, now: datetime, dashboard_url: str | None
) -> Approval | None:
    """Within ``approval_minutes`` of the evening stop, ask to approve the AMI change of the start after it."""
    settings = ref.settings
    if not settings.image.approve or not settings.image.moves:
        return None
    lead = timedelta(minutes=settings.policy.approval_minutes or DEFAULT_APPROVAL_MINUTES)
    upcoming = schedule.next_transitions(now - timedelta(seconds=1), 3)
    stops = [t for t in upcoming if t.state == "stopped"]
    if not stops or stops[0].at - now > lead or now >= stops[0].at:
        return None
    starts = [t for t in upcoming if t.state == "running" and t.at > stops[0].at]
    if not starts:
        return None
    start_at = starts[0].at
    known = engine.accounts.known(ref) or ref
    record = engine.store.get(known.key)
    if record is not None and _asked(record, start_at):
        return None
    known, _ = engine.identify(ref)
    read = engine.read_file
    view = stop_roles(engine.describe(known), record, None if read is None else lambda uri: read(known, uri), now)
    # The groups at zero after that stop, as the planner and the guards decide it (floors, keep, the
    # Slurm head, an approval of the release not given): only those can move release while at zero.
    stop = forecast(
        view, record, known, engine.guards_for(known), now=now, transition_at=stops[0].at, origin="schedule"
    )
    asleep = {g.group for g in stop.groups if g.after == 0}
    moves = [u for u in image_update.wanted(engine, known, record, view, asleep) if u.why != "rolled back"]
    if not moves:
        return None
    text = (
        f"approval needed: the {start_at:%a %H:%M}Z start first moves AMI releases while the cluster is at zero "
        f"({images.line(moves)}). Without an approval by {start_at:%H:%M}Z the groups stay pinned."
    )
    groups = [u.group for u in moves]
    asked = lambda rec: _asked(rec, start_at)  # noqa: E731
    return ask(engine, known, ref.name, "image", groups, start_at, now, asked, text, {"image": True}, dashboard_url)


def approved(
    record: ClusterRecord | None,
    updates: Sequence[ImageUpdate],
    start_at: datetime | None,
    now: datetime | None = None,
) -> list[ImageUpdate]:
    """The changes a person approved for this start (and every roll-back, which needs no approval). With
    no ``start_at`` but ``now`` (a forecast that does not know the start), an approval of any start still
    to come counts."""
    granted: set[str] = set()
    for a in record.approvals if record is not None else []:
        if a.kind != "image" or a.state != "approved":
            continue
        if a.transition_at == start_at or (start_at is None and now is not None and a.transition_at > now):
            granted.update(a.groups)
    return [u for u in updates if u.why == "rolled back" or u.group in granted]


def _asked(record: ClusterRecord, start_at: datetime) -> bool:
    return any(a.kind == "image" and a.transition_at == start_at for a in record.approvals)
