"""Training plans: reserved capacity blocks with a start, an end and a count, on the emulator's clock.

A plan holds one or more blocks (``ReservedCapacitySummaries``). A block is Scheduled before its
start, Active until its end and Expired after it; the plan is Active while any block is, Scheduled
while none is yet, Expired once all are over. A group with a ``TrainingPlanArn`` launches only into
its plan's Active blocks of its instance type (never the shared pool), and when a block ends its
nodes go away (reserved capacity is returned, whatever the group's target says).

Plans are configured in the capacity file (``training_plans:``) or at run time
(``backend.add_training_plan``); AWS's purchase flow (SearchTrainingPlanOfferings, CreateTrainingPlan)
is not modelled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hyperpod_scheduler.emulator.model_timing import moment, parse_moment
from hyperpod_scheduler.errors import UsageError

SCHEDULED = "Scheduled"
ACTIVE = "Active"
EXPIRED = "Expired"

DEFAULT_ACCOUNT = "123456789012"
DEFAULT_REGION = "us-east-1"
_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}$")
_REGION = re.compile(r"^[a-z]{2}-[a-z]+-\d$")
_ACCOUNT = re.compile(r"^\d{12}$")
# ReservedCapacityInstanceType in the botocore model: the types a training plan can reserve.
PLAN_INSTANCE_TYPE = re.compile(r"^ml\.(p4d|p4de|p5|p5e|p5en|p6-b200|p6-b300|p6e-gb200|trn1|trn2)\.\d*x?large$")


@dataclass(frozen=True)
class Block:
    instance_type: str
    count: int
    start_at: datetime | None
    start_offset: float | None
    end_at: datetime | None
    end_offset: float | None

    def start(self, origin: datetime) -> datetime:
        when = moment(self.start_at, self.start_offset, origin)
        assert when is not None
        return when

    def end(self, origin: datetime) -> datetime:
        when = moment(self.end_at, self.end_offset, origin)
        assert when is not None
        return when

    def status(self, t: datetime, origin: datetime) -> str:
        if t < self.start(origin):
            return SCHEDULED
        return ACTIVE if t < self.end(origin) else EXPIRED

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_type": self.instance_type,
            "count": self.count,
            "start_at": self.start_at,
            "start_offset": self.start_offset,
            "end_at": self.end_at,
            "end_offset": self.end_offset,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Block:
        return cls(
            str(d["instance_type"]),
            int(d["count"]),
            d.get("start_at"),
            d.get("start_offset"),
            d.get("end_at"),
            d.get("end_offset"),
        )


@dataclass(frozen=True)
class TrainingPlan:
    name: str
    blocks: tuple[Block, ...]
    account: str = DEFAULT_ACCOUNT
    region: str = DEFAULT_REGION
    upfront_fee: str | None = None
    currency: str = "USD"

    @property
    def arn(self) -> str:
        return f"arn:aws:sagemaker:{self.region}:{self.account}:training-plan/{self.name}"

    def start(self, origin: datetime) -> datetime:
        return min(b.start(origin) for b in self.blocks)

    def end(self, origin: datetime) -> datetime:
        return max(b.end(origin) for b in self.blocks)

    def status(self, t: datetime, origin: datetime) -> str:
        states = {b.status(t, origin) for b in self.blocks}
        if ACTIVE in states:
            return ACTIVE
        return SCHEDULED if SCHEDULED in states else EXPIRED

    def instance_types(self) -> set[str]:
        return {b.instance_type for b in self.blocks}

    def active_count(self, instance_type: str, t: datetime, origin: datetime) -> int:
        return sum(b.count for b in self.blocks if b.instance_type == instance_type and b.status(t, origin) == ACTIVE)

    def boundaries(self, origin: datetime) -> list[datetime]:
        """Every moment a block starts or ends: when what the plan can give changes."""
        return sorted({b.start(origin) for b in self.blocks} | {b.end(origin) for b in self.blocks})

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "blocks": [b.to_dict() for b in self.blocks],
            "account": self.account,
            "region": self.region,
            "upfront_fee": self.upfront_fee,
            "currency": self.currency,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainingPlan:
        return cls(
            name=str(d["name"]),
            blocks=tuple(Block.from_dict(b) for b in d["blocks"]),
            account=str(d.get("account", DEFAULT_ACCOUNT)),
            region=str(d.get("region", DEFAULT_REGION)),
            upfront_fee=d.get("upfront_fee"),
            currency=str(d.get("currency", "USD")),
        )


def _count(raw: Any, where: str) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 1:
        return raw
    raise UsageError(f"{where}: expected a count >= 1, got {raw!r}")


def _block(raw: Mapping[str, Any], where: str) -> Block:
    itype = raw.get("instance_type")
    if not isinstance(itype, str) or not PLAN_INSTANCE_TYPE.match(itype):
        raise UsageError(f"{where}.instance_type: not a type a training plan can reserve, got {itype!r}")
    count = _count(raw.get("count"), f"{where}.count")
    if "start" not in raw:
        raise UsageError(f"{where}.start: required (an ISO time or an offset like '+1h')")
    start_at, start_offset = parse_moment(raw["start"], f"{where}.start")
    if "end" in raw and "duration_hours" in raw:
        raise UsageError(f"{where}: give end or duration_hours, not both")
    if "end" in raw:
        end_at, end_offset = parse_moment(raw["end"], f"{where}.end")
    elif "duration_hours" in raw:
        hours = raw["duration_hours"]
        if isinstance(hours, bool) or not isinstance(hours, int | float) or not hours > 0:
            raise UsageError(f"{where}.duration_hours: expected a number of hours > 0, got {hours!r}")
        if start_at is not None:
            end_at, end_offset = start_at + timedelta(hours=hours), None
        else:
            end_at, end_offset = None, (start_offset or 0.0) + hours * 3600.0
    else:
        raise UsageError(f"{where}: needs end or duration_hours")
    block = Block(itype, count, start_at, start_offset, end_at, end_offset)
    # Offsets and absolute times compare only once an origin exists; check the pure cases now.
    if (start_at is None) == (end_at is None):
        probe = start_at or datetime.fromtimestamp(0).astimezone()
        if not block.end(probe) > block.start(probe):
            raise UsageError(f"{where}: the block must end after it starts")
    return block


_BLOCK_KEYS = {"instance_type", "count", "start", "end", "duration_hours"}
_PLAN_KEYS = _BLOCK_KEYS | {"blocks", "account", "region", "upfront_fee"}


def plan_from_dict(name: Any, raw: Any, where: str) -> TrainingPlan:
    """One entry of the capacity file's ``training_plans:`` (or of ``backend.add_training_plan``)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise UsageError(f"{where}: {name!r} is not a training plan name (letters, digits, hyphens; up to 64)")
    if not isinstance(raw, Mapping):
        raise UsageError(f"{where}: expected a mapping (instance_type, count, start, end or duration_hours)")
    for key in raw:
        if key not in _PLAN_KEYS:
            raise UsageError(f"{where}.{key}: unknown key (known: {', '.join(sorted(_PLAN_KEYS))})")
    if "blocks" in raw:
        if any(k in raw for k in _BLOCK_KEYS):
            raise UsageError(f"{where}: give blocks, or one block's fields, not both")
        items = raw["blocks"]
        if not isinstance(items, list) or not 1 <= len(items) <= 5:
            raise UsageError(f"{where}.blocks: expected a list of 1 to 5 blocks")
        blocks = []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise UsageError(f"{where}.blocks[{i}]: expected a mapping")
            for key in item:
                if key not in _BLOCK_KEYS:
                    raise UsageError(
                        f"{where}.blocks[{i}].{key}: unknown key (known: {', '.join(sorted(_BLOCK_KEYS))})"
                    )
            blocks.append(_block(item, f"{where}.blocks[{i}]"))
    else:
        blocks = [_block(raw, where)]
    account, region = str(raw.get("account", DEFAULT_ACCOUNT)), str(raw.get("region", DEFAULT_REGION))
    if not _ACCOUNT.match(account):
        raise UsageError(f"{where}.account: expected 12 digits, got {account!r}")
    if not _REGION.match(region):
        raise UsageError(f"{where}.region: not a region name, got {region!r}")
    fee = raw.get("upfront_fee")
    if fee is not None and (isinstance(fee, bool) or not isinstance(fee, int | float | str)):
        raise UsageError(f"{where}.upfront_fee: expected an amount, got {fee!r}")
    return TrainingPlan(name, tuple(blocks), account, region, str(fee) if fee is not None else None)


def plans_from_dict(raw: Any, where: str = "training_plans") -> tuple[TrainingPlan, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise UsageError(f"{where}: expected a mapping of plan name to its blocks")
    plans = tuple(plan_from_dict(name, value, f"{where}.{name}") for name, value in raw.items())
    return plans
