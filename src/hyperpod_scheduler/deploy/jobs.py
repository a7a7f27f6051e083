"""The orchestrator's fan-out message: one self-contained job per (account, region) target.

A job carries the target's slice of the config (schedules and defaults included), so a worker
needs no second read of the fleet config and every worker of one tick sees the same config.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.deploy.fleet_config import ACCOUNT_PATTERN, FleetConfig
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import bounded

JOB_FORMAT = 1
# SQS takes at most 10 messages per SendMessageBatch.
BATCH = 10


class TargetJob(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = JOB_FORMAT
    account: str = Field(pattern=ACCOUNT_PATTERN)
    region: str = Field(min_length=1)
    role_arn: str = Field(min_length=1)
    scheduled_at: AwareDatetime
    config: Config

    @property
    def label(self) -> str:
        return f"{self.account}/{self.region}"


def jobs_for(fleet: FleetConfig, scheduled_at: datetime) -> list[TargetJob]:
    return [
        TargetJob(
            account=t.account,
            region=t.region,
            role_arn=fleet.role_for(t),
            scheduled_at=scheduled_at,
            config=fleet.for_target(t),
        )
        for t in fleet.targets
    ]


def encode_job(job: TargetJob) -> str:
    return job.model_dump_json(exclude_defaults=False)


def decode_job(body: str) -> TargetJob:
    data: Any = bounded.load_json(body, "worker message")
    if isinstance(data, dict) and data.get("format", JOB_FORMAT) != JOB_FORMAT:
        raise UsageError(f"worker message: format {data.get('format')!r} is not {JOB_FORMAT} (hub out of date?)")
    try:
        return TargetJob.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "body"
        raise UsageError(f"worker message: {where}: {err['msg']}") from None


def batches(jobs: list[TargetJob]) -> list[list[TargetJob]]:
    return [jobs[i : i + BATCH] for i in range(0, len(jobs), BATCH)]
