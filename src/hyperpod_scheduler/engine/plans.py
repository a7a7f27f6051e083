"""Training plans, pure: what a DescribeTrainingPlan answer says, which expiry warnings are due, when
to look again, and the reserved instance-seconds that ran idle between two looks.

A group on a training plan is never scaled down (its capacity is prepaid and reserved); what the
scheduler does for it is watch the plan: warn before it ends, start its group when a Scheduled block
becomes Active, and count the paid hours nobody used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hyperpod_scheduler.store.records import PlanStatus, PlanWatch

WARN_DAYS = (7, 3, 1)  # days before a plan's end that it is warned about, once each
LOOK_EVERY = timedelta(hours=1)
_STATUSES = ("Pending", "Active", "Scheduled", "Expired", "Failed")


@dataclass(frozen=True)
class Block:
    instance_type: str | None
    count: int
    status: str
    start: datetime | None
    end: datetime | None


@dataclass(frozen=True)
class PlanFacts:
    status: PlanStatus | None
    end: datetime | None
    total: int
    in_use: int
    available: int
    upfront_fee: float | None
    currency: str | None
    hours: float | None
    blocks: tuple[Block, ...]

    def active_count(self, instance_type: str | None) -> int:
        """Reserved instances of this type in the plan's Active blocks."""
        return sum(b.count for b in self.blocks if b.status == "Active" and b.instance_type in (instance_type, None))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _time(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) and value.tzinfo is not None else None


def read_plan(answer: Mapping[str, Any]) -> PlanFacts:
    """The members the watch uses; anything missing or odd reads as unknown, never as a guess."""
    status = answer.get("Status")
    fee: float | None
    try:
        fee = float(answer["UpfrontFee"]) if answer.get("UpfrontFee") not in (None, "") else None
    except (TypeError, ValueError):
        fee = None
    hours = None
    if isinstance(answer.get("DurationHours"), int):
        hours = answer["DurationHours"] + _int(answer.get("DurationMinutes")) / 60
    blocks = tuple(
        Block(
            instance_type=b.get("InstanceType") if isinstance(b.get("InstanceType"), str) else None,
            count=_int(b.get("TotalInstanceCount")),
            status=str(b.get("Status", "")),
            start=_time(b.get("StartTime")),
            end=_time(b.get("EndTime")),
        )
        for b in answer.get("ReservedCapacitySummaries") or []
        if isinstance(b, Mapping)
    )
    return PlanFacts(
        status=status if status in _STATUSES else None,
        end=_time(answer.get("EndTime")),
        total=_int(answer.get("TotalInstanceCount")),
        in_use=_int(answer.get("InUseInstanceCount")),
        available=_int(answer.get("AvailableInstanceCount")),
        upfront_fee=fee,
        currency=answer.get("CurrencyCode") if isinstance(answer.get("CurrencyCode"), str) else None,
        hours=hours,
        blocks=blocks,
    )


def warnings_due(end: datetime | None, warned: Sequence[int], now: datetime) -> tuple[int | None, list[int]]:
    """(the threshold to warn about now or None, every threshold that counts as given after it). A plan
    first seen two days before its end gets one warning (the 3-day one), not three."""
    if end is None or now >= end:
        return None, list(warned)
    passed = [d for d in WARN_DAYS if now >= end - timedelta(days=d)]
    fresh = [d for d in passed if d not in warned]
    if not fresh:
        return None, list(warned)
    return min(fresh), sorted(set(warned) | set(passed), reverse=True)


def next_look(facts: PlanFacts, warned: Sequence[int], now: datetime) -> datetime:
    """Within the hour, and exactly when a block starts or ends or a warning falls due."""
    moments = [now + LOOK_EVERY]
    for b in facts.blocks:
        moments.extend(t for t in (b.start, b.end) if t is not None and t > now)
    if facts.end is not None:
        moments.extend(
            facts.end - timedelta(days=d) for d in WARN_DAYS if d not in warned and facts.end - timedelta(days=d) > now
        )
    return min(moments)


def idle_by_day(since: datetime, until: datetime, available: int) -> dict[str, float]:
    """``available`` reserved instances idle over [since, until), in instance-seconds per UTC day."""
    out: dict[str, float] = {}
    cursor = since
    while cursor < until and available > 0:
        midnight = (cursor + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        stop = min(until, midnight)
        day = cursor.date().isoformat()
        out[day] = out.get(day, 0.0) + available * (stop - cursor).total_seconds()
        cursor = stop
    return out


def became_active(watch: PlanWatch, facts: PlanFacts) -> int | None:
    """The reserved count to start the plan's group at, when a block of its type became Active since
    the last look (a Scheduled plan turning Active, or a later block starting); else None. A first look
    is never an activation: what it finds running is how the team left it."""
    now_active = facts.active_count(watch.instance_type)
    if watch.seen_at is None or now_active <= watch.reserved_active:
        return None
    return now_active


def seen(watch: PlanWatch, facts: PlanFacts, now: datetime) -> PlanWatch:
    """``watch`` after a look: idle time since the last look (at the last look's count) added."""
    idle = dict(watch.idle_s_by_day)
    if watch.status == "Active" and watch.seen_at is not None and watch.seen_at < now:
        for day, s in idle_by_day(watch.seen_at, now, watch.available).items():
            idle[day] = idle.get(day, 0.0) + s
    return watch.evolve(
        status=facts.status,
        end=facts.end,
        total=facts.total,
        in_use=facts.in_use,
        available=facts.available,
        reserved_active=facts.active_count(watch.instance_type),
        upfront_fee=facts.upfront_fee,
        currency=facts.currency,
        hours=facts.hours,
        seen_at=now,
        idle_s_by_day=dict(sorted(idle.items())[-400:]),  # a year and a bit, for reports
    )


def idle_hours(watch: PlanWatch, since: datetime, until: datetime) -> float:
    """Reserved instance-hours idle on the UTC days that fall in [since, until)."""
    first, last = since.date().isoformat(), until.date().isoformat()
    return sum(s for day, s in watch.idle_s_by_day.items() if first <= day <= last) / 3600


def hourly_rate(watch: PlanWatch) -> float | None:
    """What one reserved instance-hour of the plan costs: its upfront fee over its instance-hours."""
    if watch.upfront_fee is None or not watch.hours or not watch.total:
        return None
    return watch.upfront_fee / (watch.hours * watch.total)


def plan_name(arn: str) -> str:
    return arn.rsplit("/", 1)[-1]
