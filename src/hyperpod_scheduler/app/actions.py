"""What a stop would send for one cluster, and which actions a person is offered: computed once, here,
from the planner and the guards (``engine.stop_forecast``), for every face.

The dashboard's stop preview, its "tonight" and "kept at stop", "never stopped" on the Schedules page,
the Fleet and cluster pages' buttons, and ``plan``'s kept groups all read ``stop_forecast``: none of
them works out what a stop keeps from the capacity protections alone (which miss the Slurm roles a
record remembers, the approval guard, a blocked or refused stop, and the floor's clamp to the target).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError

from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.app.instants import parse_instant
from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.engine.planner import Action, State
from hyperpod_scheduler.engine.ref import ClusterRef, Result
from hyperpod_scheduler.engine.slurm_roles import FileUnreadable, stop_roles
from hyperpod_scheduler.engine.start_forecast import StartForecast
from hyperpod_scheduler.engine.start_forecast import forecast as start_forecast_of
from hyperpod_scheduler.engine.stop_forecast import GroupForecast, StopForecast, forecast
from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError
from hyperpod_scheduler.inputs.text import unsafe_in_line
from hyperpod_scheduler.schedule import Schedule
from hyperpod_scheduler.store.records import ClusterRecord

if TYPE_CHECKING:
    from hyperpod_scheduler.engine.runner import Engine

WEEK = timedelta(days=7)
LABELS = {"hold": "Hold until…", "release": "Release the hold", "stop": "Stop now", "start": "Start now"}


def scheduled_stop_at(schedule: Schedule, now: datetime) -> datetime | None:
    """The schedule's stop a forecast is about: the one that began the stopped stretch the schedule is
    in now, else the next one within a week (None: the schedule does not stop it this week, or its mode
    never stops it: a start-only schedule's stops are skipped)."""
    if not schedule.allows("stop"):
        return None
    if not schedule.is_running(now):
        last = schedule.last_transition(now)
        return last.at if last is not None else now
    return next((t.at for t in schedule.transitions(now, now + WEEK) if t.state == "stopped"), None)


def stop_view(ctx: Context, ref: ClusterRef, view: ClusterView, record: ClusterRecord | None) -> ClusterView:
    """``view`` with the Slurm roles the stop itself would use (``engine.acting.act``: the record's
    remembered roles while they fit, else provisioning_parameters.json read from S3), remembering
    nothing. A cluster never stopped has no roles remembered yet: the faces read the file as its first
    stop will, rather than zero a controller that stop keeps with its kept workers."""

    def read(uri: str) -> bytes:
        try:
            return ctx.read_file(ref, uri)
        except FileUnreadable:
            raise
        except (BotoCoreError, HyperpodSchedulerError) as exc:  # no S3 client for it: roles unknown, said
            raise FileUnreadable(f"{uri}: {exc}") from None

    return stop_roles(view, record, read, ctx.now())


def stop_forecast(
    ctx: Context,
    ref: ClusterRef,
    view: ClusterView,
    *,
    schedule: Schedule | None = None,
    include_protected: bool = False,
) -> StopForecast:
    """What a stop of ``ref`` would send, decided by the planner and the guards from ``view`` (a fresh
    DescribeCluster) with the Slurm roles the record remembers. ``schedule``: the schedule's stop (its
    instant, as the scheduler sends it: an approval asked for it counts, an EKS stop without an audit
    is blocked); None: a person's stop now (the CLI's ``stop``, the dashboard's Stop now)."""
    now = ctx.now()
    record = ctx.store.get(ref.key)
    view = stop_view(ctx, ref, view, record)
    guards = ctx.guards_built(ref, include_protected, side_effects=False)
    at = scheduled_stop_at(schedule, now) if schedule is not None else None
    return forecast(
        view,
        record,
        ref,
        guards,
        now=now,
        transition_at=at or now,
        origin="schedule" if schedule is not None else "manual",
        audited_at_stop=ref.settings.checkpoints is not None,
    )


def start_forecast(ctx: Context, ref: ClusterRef, view: ClusterView) -> StartForecast:
    """What a person's start of ``ref`` would send now: the planner's own ``plan_start`` (a group or
    cluster replaced while stopped is refused, a group set by hand is kept) and the hold that would
    refuse it, from ``view`` (a fresh DescribeCluster) and the record. The dashboard's preview shows it."""
    return start_forecast_of(view, ctx.store.get(ref.key), ctx.now(), ref.command("release"))


def never_stopped(f: StopForecast, recorded: Mapping[str, int]) -> bool:
    """A stop would send nothing only because it keeps every group with nodes, and no group is below the
    size the record keeps for it (a stop that walked one down did stop the cluster: a start restores
    it, whatever its kept groups still bill). Such a cluster is never called stopped."""
    if not f.keeps_everything:
        return False
    now = {g.group: g.now for g in f.groups}
    return not any(int(n or 0) > now.get(name, 0) for name, n in recorded.items())


def change_text(g: GroupForecast) -> str:
    """One group's line in a stop preview: ``stays at 4: policy floor 4``, ``to 0`` or ``at 0``."""
    if g.after:
        return f"stays at {g.after}: {g.why}" if g.why else f"stays at {g.after}"
    return "to 0" if g.now else "at 0"


def nothing_text(f: StopForecast) -> str | None:
    """Why a stop would send nothing, in a sentence for a preview; None when it sends an update."""
    if f.outcome == "sends":
        return None
    if f.outcome == "nothing":
        if not f.kept:
            return "already stopped: nothing would be sent"
        return "every group with nodes is protected: nothing would be sent"
    if f.outcome == "blocked":
        return f"the stop would be blocked ({f.reason}): nothing would be sent"
    if f.outcome == "busy":
        return f"{f.reason}: nothing would be sent now"
    return f"no update may be sent to this cluster ({f.reason}): nothing would be sent"


def reason_short(reason: str) -> str:
    """The first clause of a guard's reason (``scarce capacity (ml.p5.48xlarge) ...``)."""
    text = reason.split(" is not released")[0].split(" stays up with")[0]
    if "Slurm" in reason and "stays up" in reason:
        return "the Slurm head stays up with the kept compute group"
    return text


def kept_why(f: StopForecast) -> str:
    """Why the kept groups stay, each reason once, in the order of the groups."""
    return "; ".join(dict.fromkeys(reason_short(g.why) for g in f.kept if g.why))


def buttons(state: str, billing: bool, held: bool) -> list[str]:
    """The actions that make sense now: no "Start now" on a running cluster, no "Release" without a
    hold, and neither Stop nor Start taken away while the other is settling (a start sent by mistake
    is stopped from the same page; the stop follows the start once it settles)."""
    out: list[str] = []
    if state == "starting":
        out.append("stop")
    elif state == "stopping":
        out.append("start")
    else:
        if state != "stopped" or billing:
            out.append("stop")
        if state != "running":
            out.append("start")
    out.append("hold")
    if held:
        out.append("release")
    return out


def actions(state: str, billing: bool, held: bool, f: StopForecast | None, recorded: Mapping[str, int]) -> list[str]:
    """The buttons for a cluster in ``state``: one whose stop would send nothing because it keeps every
    group (``never_stopped``) is offered what a running cluster is, never "Start now"."""
    if f is not None and state == "stopped" and never_stopped(f, recorded):
        return buttons("running", True, held)
    return buttons(state, billing, held)


def check_hold(
    state: str, until: str | None, now: datetime, *, state_field: str, until_field: str
) -> tuple[State, datetime | None]:
    """A hold as a person asked for it (the CLI's ``hold``, the dashboard's Hold until): the state it
    keeps and when it ends, or a one-line error naming the face's own field."""
    if state not in ("running", "stopped"):
        raise UsageError(f"{state_field}: {state!r} is not one of running, stopped")
    if until is not None and not until.strip():
        # An empty value (a script's unset variable) was a hold until released: never ending, unasked.
        raise UsageError(f"{until_field}: empty; give an ISO 8601 instant, or leave it out to hold until released")
    end = parse_instant(until, until_field) if until else None
    if end is not None and end <= now:
        raise UsageError(f"{until_field}: {until!r} is not in the future")
    return ("running" if state == "running" else "stopped"), end


MAX_REASON = 500  # characters: a line in the history and a notice, not a document


def check_reason(reason: str, field: str) -> str:
    """A person's reason for a hold (the CLI's ``--reason``, the dashboard's field), as recorded, or a
    one-line error naming the face's field. Refused rather than cut or cleaned: what the history keeps is
    what was typed. Control characters (a terminal escape, a newline forging a second history line) never
    reach the history, a terminal or a notice."""
    if len(reason) > MAX_REASON:
        raise UsageError(f"{field}: {len(reason):,} characters, at most {MAX_REASON} allowed")
    if unsafe_in_line(reason):  # what the CLI would escape: C0, DEL, C1, separators, bidi marks
        raise UsageError(f"{field}: holds a control character (an escape code or a line break); type plain text")
    return reason.strip()


MAX_BY = 64  # characters: who asked, as the history's actor names them


def check_by(by: str, field: str) -> str:
    """Who asks (the dashboard's "by"), as recorded, or a one-line error naming the face's field: the
    rules of ``check_reason``, and at most ``MAX_BY`` characters (refused, not cut: it was accepted up to
    500 and recorded cut to 64 without a word)."""
    if len(by) > MAX_BY:
        raise UsageError(f"{field}: {len(by):,} characters, at most {MAX_BY} allowed")
    return check_reason(by, field)


def act_now(
    engine: Engine,
    ref: ClusterRef,
    action: Action,
    now: datetime,
    *,
    source: str,
    reason: str,
    dry_run: bool = False,
    wait: bool = False,
    poll_seconds: float = 30.0,
) -> Result:
    """A person's stop or start, now (the CLI's ``stop``/``start``, the dashboard's Stop now/Start now):
    one transition per request, ``<source>-<action>@<instant>``, so a retry of the same request is the
    same transition and a new request is a new one."""
    return engine.act(
        ref,
        action,
        transition_id=f"{source}-{action}@{now.isoformat()}",
        reason=reason,
        dry_run=dry_run,
        wait=wait,
        poll_seconds=poll_seconds,
    )


__all__ = [
    "LABELS",
    "act_now",
    "actions",
    "buttons",
    "change_text",
    "check_hold",
    "kept_why",
    "never_stopped",
    "nothing_text",
    "reason_short",
    "scheduled_stop_at",
    "stop_forecast",
    "stop_view",
]
