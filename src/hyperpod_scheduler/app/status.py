"""The status of each cluster, as the CLI's ``status`` and the dashboard's fleet page both show it.

One builder, one price source (the context's): a figure cannot differ between the two faces.
Nothing here calls AWS: a status row is the record, the schedule and the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hyperpod_scheduler.app.billing import (
    Billing,
    flexible_text,
    hourly_now,
    hourly_of,
    hourly_up,
    last_line,
    left_billing,
    line_types,
    one_type,
)
from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.app.freshness import reads_document, unreachable_text
from hyperpod_scheduler.app.history import sentence
from hyperpod_scheduler.app.wording import count_of, usd, when, when_seen_at
from hyperpod_scheduler.cost.prices import PriceTable
from hyperpod_scheduler.cost.rates import money
from hyperpod_scheduler.cost.savings import keep_cost_per_night
from hyperpod_scheduler.engine.fleet import Governed, schedule_state
from hyperpod_scheduler.engine.held import next_change
from hyperpod_scheduler.engine.planner import effective_hold, live_retry
from hyperpod_scheduler.schedule import Schedule
from hyperpod_scheduler.store.errors import CorruptRecordError
from hyperpod_scheduler.store.outcomes import read_outcomes
from hyperpod_scheduler.store.records import (
    LEGACY_ACCOUNT,
    AmiChange,
    Approval,
    AwsReads,
    ClusterRecord,
    GroupOutcome,
    HistoryEntry,
    Hold,
    PlanWatch,
    Refusal,
    RetryState,
)

NOT_GOVERNED = "(not governed)"
# Records the agent channel keeps in a shared store: they are messages, not clusters.
AGENT_KEY_PREFIX = "agent/"


@dataclass(frozen=True)
class KeptGroup:
    """A group the last stop left running (protected capacity, ``keep``, a floor), and its nightly cost."""

    group: str
    kept: int
    instance_type: str | None
    keep_cost_per_night_usd: float | None
    price_is_upper_bound: bool = False  # a flexible group priced at its dearest type: "up to"
    instance_types: tuple[str, ...] = ()  # every type it may run (several: a flexible group)

    @property
    def type_text(self) -> str | None:
        return self.instance_type or flexible_text(self.instance_types)


@dataclass(frozen=True)
class Flag:
    """Something the fleet view shows beside the state: ``held``, ``blocked``, ``shortfall``,
    ``refused``, ``ami``, ``kept``."""

    kind: str
    text: str


@dataclass(frozen=True)
class StatusRow:
    key: str
    cluster: str
    region: str | None
    schedule: str  # the schedule's label, or NOT_GOVERNED
    schedule_expression: str | None
    state: str  # running | stopped | stopping | starting | unknown
    hold: Hold | None  # only a hold in force now
    recorded_sizes: Mapping[str, int]
    next_transition: tuple[datetime, str] | None  # (at, state)
    protected: tuple[KeptGroup, ...]
    last_outcomes: tuple[GroupOutcome, ...]
    retry: RetryState | None
    refused: Refusal | None = None  # the last stop or start the engine would not send, and why
    ami_changes: tuple[AmiChange, ...] = ()  # groups the last start brought back on another AMI
    billing: tuple[Billing, ...] = ()  # what still runs while stopped (from the last stop's outcomes)
    usd_per_hour: float | None = None  # what the cluster bills now, by its recorded sizes and outcomes
    # What it bills once a start brings back the sizes its last stop recorded (``billing.hourly_up``):
    # for a stopped cluster held running, what it bills from the next tick on (else what it bills now).
    # None when not known.
    usd_per_hour_up: float | None = None
    up_is_upper_bound: bool = False  # ``usd_per_hour_up`` prices a flexible group at its dearest type
    # ``usd_per_hour`` prices a flexible group at the dearest type it may run: it bills up to that.
    price_is_upper_bound: bool = False
    flags: tuple[Flag, ...] = ()
    timezone: str | None = None  # the schedule's, for local times beside UTC
    approval: Approval | None = None  # the latest request to approve a release (its token's hash never shown)
    plans: tuple[PlanWatch, ...] = ()  # training plans the cluster's groups run on, as last read
    wants_now: str | None = None  # what the schedule (or a hold) wants at this moment: running | stopped
    # A start that came back short whose retry no tick will run (the schedule wants stopped again, or
    # past its deadline): said, never promised.
    retry_dropped: RetryState | None = None
    # When the record was last written: every figure here is the record's (status calls no AWS), so a
    # face says "as recorded at", never "as of now".
    recorded_at: datetime | None = None
    # The applied state was "stopped" but the last stop kept every group (it sent nothing): the row
    # reads running, and says why. A typed fact, not a flag's text read back.
    stop_sent_nothing: bool = False
    # How the engine's last DescribeCluster reads went (engine.reads): failing, every figure above is
    # as of ``reads.sizes_as_of``, and the row says since when AWS has not answered.
    reads: AwsReads | None = None
    # The account the cluster is in (None: not known yet, a record from before account keys).
    account: str | None = None
    # The profile its target reaches it through (None: the default credentials, or not governed): what
    # tells two namesakes apart before their accounts are known.
    profile: str | None = None
    # The fleet's pause switch is on (``Pause.line``): this cluster is neither stopped nor started.
    paused: str | None = None
    # Its record or history could not be read (``CorruptRecordError``): every figure above is unknown.
    damaged: bool = False

    @property
    def aws_unreachable(self) -> bool:
        return self.reads is not None and self.reads.failing

    @property
    def governed(self) -> bool:
        return self.schedule != NOT_GOVERNED

    def document(self) -> dict[str, Any]:
        """The row as JSON (``status --json`` and ``/api/fleet``)."""
        nxt = self.next_transition
        return {
            "key": self.key,
            "cluster": self.cluster,
            "account": self.account,
            "profile": self.profile,
            "region": self.region,
            "paused": self.paused,
            "schedule": self.schedule,
            "schedule_expression": self.schedule_expression,
            "state": self.state,
            "hold": None if self.hold is None else self.hold.model_dump(mode="json"),
            "recorded_sizes": dict(self.recorded_sizes),
            "next_transition": {"at": nxt[0].isoformat(), "state": nxt[1]} if nxt else None,
            "protected": [
                {
                    "group": p.group,
                    "kept": p.kept,
                    "instance_type": p.instance_type,
                    "instance_types": list(p.instance_types),
                    "keep_cost_per_night_usd": p.keep_cost_per_night_usd,
                    "price_is_upper_bound": p.price_is_upper_bound,
                }
                for p in self.protected
            ],
            "last_outcomes": [o.model_dump(mode="json") for o in self.last_outcomes],
            "retry": None if self.retry is None else self.retry.model_dump(mode="json"),
            "retry_dropped": None if self.retry_dropped is None else self.retry_dropped.model_dump(mode="json"),
            "wants_now": self.wants_now,
            "recorded_at": None if self.recorded_at is None else self.recorded_at.isoformat(),
            "stop_sent_nothing": self.stop_sent_nothing,
            "aws": reads_document(self.reads),
            "refused": None if self.refused is None else self.refused.model_dump(mode="json"),
            "ami_changes": [c.model_dump(mode="json") for c in self.ami_changes],
            "state_text": state_text(self),
            "billing": [
                {
                    "group": b.group,
                    "count": b.count,
                    "instance_type": b.instance_type,
                    "instance_types": list(b.instance_types),
                    "usd_per_hour": b.usd_per_hour,
                    "price_is_upper_bound": b.price_is_upper_bound,
                }
                for b in self.billing
            ],
            "usd_per_hour": None if self.usd_per_hour is None else round(self.usd_per_hour, 2),
            "price_is_upper_bound": self.price_is_upper_bound,
            "flags": [{"kind": f.kind, "text": f.text} for f in self.flags],
            "timezone": self.timezone,
            "approval": None
            if self.approval is None
            else {
                "id": self.approval.id,
                "groups": list(self.approval.groups),
                "stop": self.approval.transition_at.isoformat(),
                "expires": self.approval.expires_at.isoformat(),
                "state": self.approval.state,
                "by": self.approval.by,
            },
            "training_plans": [
                {
                    "plan": p.arn,
                    "groups": list(p.groups),
                    "status": p.status,
                    "ends": p.end.isoformat() if p.end else None,
                    "total": p.total,
                    "in_use": p.in_use,
                    "warned_days": list(p.warned),
                }
                for p in self.plans
            ],
        }


def fleet_status(
    ctx: Context, *, ungoverned: bool = True, governed: Sequence[Governed] | None = None
) -> list[StatusRow]:
    """Every governed cluster, then (with ``ungoverned``) every other cluster the store remembers
    (a manual stop of a cluster outside the config). ``governed``: the fleet the caller has read
    already; finding it again is discovery again (ListClusters and tags for tag-selected targets)."""
    rows = [status_row(ctx, g) for g in (ctx.fleet().governed() if governed is None else governed)]
    if ungoverned:
        known = {r.key for r in rows}
        for key in ctx.store.list_keys():
            if key not in known and not key.startswith(AGENT_KEY_PREFIX):
                try:
                    old = ctx.store.get(key)
                except CorruptRecordError:
                    old = None  # its row says it is damaged
                if old is not None and old.moved_to is not None:
                    continue  # from before account keys, shown under its account's key
                rows.append(status_row(ctx, None, key))
    return rows


def status_row(ctx: Context, g: Governed | None, key: str | None = None) -> StatusRow:
    """The row of governed cluster ``g``, or of the remembered ``key`` when it is not governed."""
    record_key = g.ref.key if g is not None else key or ""
    now = ctx.now()
    try:
        record = ctx.store.get(record_key)
        lines = ctx.store.history(record_key, limit=HISTORY_LOOKBACK)
    except CorruptRecordError as exc:
        # One damaged row never hides the rest of the fleet: this cluster's row says so (and that nothing
        # of it is known from the store), the others are shown as usual, and ``status`` exits 1.
        return _damaged_row(g, record_key, exc)
    state = _state(record)
    sent_nothing = state == "stopped" and _stop_sent_nothing(lines)
    if sent_nothing:
        state = "running"  # every group was kept: nothing was stopped, everything still bills
    elif state == "running" and record is not None and _came_back_empty(record):
        state = "stopped"  # the start rolled back for capacity: no node runs, whatever the record applied
    prices = ctx.prices()
    billing = left_billing(record, lines, prices) if state == "stopped" else ()
    hourly = hourly_now(state, record, lines, billing, prices)
    hold = record.hold if record is not None and effective_hold(record, now) else None
    # Only where a face reads it (tonight: a cluster held running that is not up now), not on every row.
    held_up = hold is not None and hold.state == "running" and state not in ("running", "stopping")
    up = hourly_up(record, lines, prices) if held_up else hourly
    wants = hold.state if hold is not None else (schedule_state(g.schedule, now).desired if g is not None else None)
    retry, dropped = _retry(record, g, wants, now)
    approval = _latest_approval(record, now)
    flags = _flags(record, lines, hold, billing, now, sent_nothing, retry, dropped)
    reads = record.reads if record is not None else None
    if reads is not None and reads.failing:
        flags = (Flag("stale", unreachable_text(reads)), *flags)  # nothing here is live: say so first
    if approval is not None and approval.state == "pending":
        schedule = g.schedule if g is not None else None
        flags = (_approval_flag(approval, record, prices, schedule, now), *flags)  # a decision waits: first
    return StatusRow(
        **_identity(g, record_key),
        state=state,
        hold=hold,
        recorded_sizes={n: s.count for n, s in record.snapshot.sizes.items()} if record and record.snapshot else {},
        next_transition=next_change(g, hold, now),
        protected=_kept(ctx, record, lines, g.schedule if g is not None else None, now),
        last_outcomes=tuple(record.last_outcomes) if record else (),
        retry=retry,
        refused=record.refused if record else None,
        ami_changes=tuple(record.ami_changes) if record else (),
        billing=billing,
        usd_per_hour=hourly[0] if hourly else None,
        usd_per_hour_up=up[0] if up else None,
        up_is_upper_bound=up[1] if up else False,
        price_is_upper_bound=hourly[1] if hourly else False,
        flags=flags,
        approval=approval,
        plans=tuple(record.plans.values()) if record else (),
        wants_now=wants,
        retry_dropped=dropped,
        recorded_at=record.updated_at if record is not None else None,
        stop_sent_nothing=sent_nothing,
        reads=reads,
        paused=ctx.paused.line() if ctx.paused is not None else None,
    )


def _identity(g: Governed | None, record_key: str) -> dict[str, Any]:
    """Which cluster a row is of: the governed one's, else what its record's key says."""
    parts = record_key.split("/")
    keyed = len(parts) >= 3
    return {
        "key": record_key,
        "cluster": g.ref.name if g is not None else parts[-1],
        "region": g.ref.region if g is not None else (parts[-2] if keyed else None),
        "schedule": g.schedule_label if g is not None else NOT_GOVERNED,
        "schedule_expression": g.schedule.expression if g is not None else None,
        "timezone": g.schedule.timezone.key if g is not None else None,
        "account": g.ref.account if g is not None else (parts[0] if keyed and parts[0] != LEGACY_ACCOUNT else None),
        "profile": g.ref.profile if g is not None else None,
    }


def _damaged_row(g: Governed | None, record_key: str, exc: CorruptRecordError) -> StatusRow:
    return StatusRow(
        **_identity(g, record_key),
        state="unknown",
        hold=None,
        recorded_sizes={},
        next_transition=None,
        protected=(),
        last_outcomes=(),
        retry=None,
        flags=(Flag("damaged", f"{exc} (nothing of this cluster is read from the store until it is mended)"),),
        damaged=True,
    )


def _approval_flag(
    approval: Approval, record: ClusterRecord | None, prices: PriceTable, schedule: Schedule | None, now: datetime
) -> Flag:
    """A pending request to release scarce groups, with what it is about: nodes, and money per night
    (what releasing saves, and refusing keeps billing)."""
    sizes = record.snapshot.sizes if record is not None and record.snapshot is not None else {}
    parts, hourly, priced, bound = [], 0.0, True, False
    for group in approval.groups:
        size = sizes.get(group)
        if size is None:
            parts.append(group)
            priced = False
            continue
        parts.append(f"{group} ({count_of(size.count, size.instance_type or flexible_text(size.types))})")
        cost = hourly_of(prices, size.types, size.count)
        priced = priced and cost is not None
        hourly += cost[0] if cost else 0.0
        bound = bound or (cost is not None and cost[1])
    night = money(hourly, schedule, now).per_night if priced else None
    said = f", {usd(night, up_to=bound)} per night" if night else ""
    return Flag(
        "approval",
        f"release of {', '.join(parts)} awaits approval until {when(approval.expires_at)}{said}",
    )


def _came_back_empty(record: ClusterRecord) -> bool:
    """The last start left every group at zero (rolled back for capacity): nothing runs."""
    outs = record.last_outcomes
    return bool(outs) and all(o.current == 0 for o in outs) and any(o.target > 0 for o in outs)


def _retry(
    record: ClusterRecord | None, g: Governed | None, wants: str | None, now: datetime
) -> tuple[RetryState | None, RetryState | None]:
    """(the retry a tick will run, the retry no tick will run): the planner's own rule (``live_retry``
    and a schedule or hold that wants the cluster running), so a face promises only what the engine does."""
    if record is None or record.retry is None:
        return None, None
    if g is not None:
        live = live_retry(record, schedule_state(g.schedule, now), now) is not None
    else:
        live = record.retry.deadline > now  # not governed: only a hold's start is retried
    if live and wants == "running":
        return record.retry, None
    return None, record.retry


# Enough lines to find the last stop and the last start of a week of ticks with retries.
HISTORY_LOOKBACK = 60


def last_stop_kept(ctx: Context, key: str) -> tuple[Billing, ...] | None:
    """The groups the cluster's last stop left with nodes, priced, whatever its state now (a running
    cluster's row carries no billing of a stop); None when no stop is in its recent history."""
    lines = ctx.store.history(key, limit=HISTORY_LOOKBACK)
    if last_line(lines, "stop", ("ok", "noop", "failed")) is None:
        return None
    return left_billing(ctx.store.get(key), lines, ctx.prices())


def _flags(
    record: ClusterRecord | None,
    lines: list[HistoryEntry],
    hold: Hold | None,
    billing: tuple[Billing, ...],
    now: datetime,
    sent_nothing: bool = False,
    retry: RetryState | None = None,
    dropped: RetryState | None = None,
) -> tuple[Flag, ...]:
    flags: list[Flag] = []
    if sent_nothing:
        flags.append(Flag("kept", "the last stop sent nothing: every group is kept, so the cluster still runs"))
    if hold is not None:
        until = f" until {when_seen_at(hold.until, now)}" if hold.until else " until released"
        flags.append(Flag("held", f"held {hold.state}{until} by {hold.by}"))
    if billing:
        flags.append(Flag("kept", "kept overnight: " + ", ".join(count_of(b.count, b.type_text) for b in billing)))
    stop = last_line(lines, "stop", ("ok", "noop", "blocked", "failed", "refused"))
    if stop is not None and stop.outcome == "blocked":
        flags.append(Flag("blocked", f"stop blocked {when(stop.at)}: {sentence(stop).text.split(': ', 1)[-1]}"))
    if retry is not None:
        due = "the next tick runs it" if retry.next_at <= now else "a tick then runs it"
        flags.append(
            Flag("shortfall", f"start short of capacity, retry {retry.attempt} at {when(retry.next_at)} ({due})")
        )
    elif dropped is not None and record is not None:
        short = ", ".join(f"{o.group} {o.current} of {o.target}" for o in record.last_outcomes if o.current < o.target)
        why = "past its deadline" if dropped.deadline <= now else "the schedule no longer wants it running"
        flags.append(Flag("shortfall", f"start came back short ({short}); no retry will run: {why}"))
    elif record is not None and any(o.outcome in ("partial", "failed") for o in record.last_outcomes):
        short = ", ".join(f"{o.group} {o.current} of {o.target}" for o in record.last_outcomes if o.current < o.target)
        flags.append(Flag("shortfall", f"last start came back short: {short}"))
    if record is not None and record.refused is not None:
        flags.append(Flag("refused", f"{record.refused.action} refused {when(record.refused.at)}"))
    if record is not None and record.ami_changes:
        flags.append(Flag("ami", "came back on another AMI: " + ", ".join(c.group for c in record.ami_changes)))
    return tuple(flags)


def _latest_approval(record: ClusterRecord | None, now: datetime) -> Approval | None:
    if record is None or not record.approvals:
        return None
    latest = record.approvals[-1]
    return latest.evolve(state=latest.state_at(now))


def _stop_sent_nothing(lines: list[HistoryEntry]) -> bool:
    """The last stop kept every group (protected capacity, ``keep``, the Slurm head with them): it sent
    no update, the record says "stopped" so the schedule does not retry it, and yet every node runs.
    A face that called this "stopped" would say something untrue (issue 27, item 2)."""
    stop = last_line(lines, "stop", ("ok", "noop", "failed"))
    if stop is None or stop.outcome != "noop":
        return False
    outcomes = list(read_outcomes(stop.detail).values())
    return bool(outcomes) and all(o.current > 0 for o in outcomes)


def _state(record: ClusterRecord | None) -> str:
    if record is not None and record.pending is not None:
        return "stopping" if record.pending.action == "stop" else "starting"
    return record.applied_state if record is not None and record.applied_state else "unknown"


def _kept(
    ctx: Context, record: ClusterRecord | None, lines: list[HistoryEntry], schedule: Schedule | None, now: datetime
) -> tuple[KeptGroup, ...]:
    """What the last stop kept: the snapshot's ``kept``, or (a stop that kept every group sends nothing
    and records no snapshot) the groups its history line says stayed up."""
    kept: dict[str, int] = dict(record.snapshot.kept) if record is not None and record.snapshot is not None else {}
    stop = last_line(lines, "stop", ("ok", "noop", "failed"))
    if not kept and stop is not None:
        kept = {o.group: o.current for o in read_outcomes(stop.detail).values() if o.current > 0}
    if not kept:
        return ()
    types = line_types(stop, record)
    out = []
    for group, count in kept.items():
        itypes = types.get(group, ())
        cost = keep_cost_per_night(itypes, count, schedule, now, ctx.prices())
        out.append(
            KeptGroup(
                group,
                count,
                one_type(itypes),
                None if cost is None else round(cost.usd, 2),
                cost is not None and cost.upper_bound,
                itypes,
            )
        )
    return tuple(out)


def night_hours(schedule: Schedule, now: datetime) -> float:
    """The length of the schedule's night (``cost.rates``: in progress or next, whole), for per-night
    cost figures."""
    return money(None, schedule, now).night_hours


def state_text(row: StatusRow) -> str:
    """The state as one cell that tells the truth about what bills:
    ``stopped · 4 × p5.48xlarge kept · $393.28/h`` or ``running (held running until Mon 08:00Z)``."""
    text = row.state
    if row.state == "stopped" and row.billing:
        kept = ", ".join(count_of(b.count, b.type_text) for b in row.billing)
        text += f" · {kept} kept"
        if row.usd_per_hour:
            text += f" · {usd(row.usd_per_hour, up_to=row.price_is_upper_bound)}/h"
    if row.state == "running" and row.stop_sent_nothing:
        kept = ", ".join(count_of(p.kept, p.type_text) for p in row.protected)
        text += f" · every group kept by the last stop ({kept})" if kept else " · every group kept by the last stop"
    if row.aws_unreachable:
        text += " (last known)"  # the flag says since when AWS has not answered
    if row.hold is None:
        return text
    until = f" until {row.hold.until.astimezone(UTC):%a %H:%M}Z" if row.hold.until else ""
    return f"{text} (held {row.hold.state}{until})"
