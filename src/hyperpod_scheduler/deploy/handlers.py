"""The Lambda entry points, kept thin: read the environment, call the orchestrator or one worker.

- ``orchestrator``: run by an EventBridge Scheduler rate schedule. Reads the fleet config and sends
  one SQS message per (account, region) target. It does no AWS work per cluster, so a 500-account
  fleet costs it a few SendMessageBatch calls.
- ``worker``: an SQS event source (batch size 1 in the template; more works too). Assumes the spoke
  role, runs one reconcile pass for the target, prints one JSON log line per engine event and one
  EMF metrics line. A failed target is reported as a batch item failure: SQS retries it and, after
  ``maxReceiveCount``, moves it to the dead-letter queue (an alarm watches that).

Environment: ``HYPERPOD_SCHEDULER_TABLE`` (state table), ``HYPERPOD_SCHEDULER_QUEUE_URL``
(orchestrator), ``HYPERPOD_SCHEDULER_CONFIG`` (default ``dynamodb://<table>``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.deploy import config_store, credentials, observe
from hyperpod_scheduler.deploy.jobs import TargetJob, batches, decode_job, encode_job, jobs_for
from hyperpod_scheduler.deploy.worker import SagemakerFactory, WorkerReport, run_job
from hyperpod_scheduler.errors import AwsError, HyperpodSchedulerError, UsageError
from hyperpod_scheduler.store.base import StateStore
from hyperpod_scheduler.store.dynamodb import DynamoDBStore

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_sagemaker import SageMakerClient

TABLE_ENV = "HYPERPOD_SCHEDULER_TABLE"
QUEUE_ENV = "HYPERPOD_SCHEDULER_QUEUE_URL"
CONFIG_ENV = "HYPERPOD_SCHEDULER_CONFIG"


def default_sagemaker(session: boto3.Session, region: str) -> SageMakerClient:
    from botocore.config import Config

    return session.client("sagemaker", region_name=region, config=Config(retries={"mode": "standard"}))


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Runtime:
    """What a handler needs from the outside world; ``from_env`` builds the Lambda one."""

    table: str
    config_location: config_store.Location
    queue_url: str = ""
    client_for: config_store.ClientFactory = config_store.boto3_client
    sagemaker_for: SagemakerFactory = default_sagemaker
    now: Callable[[], datetime] = _utc_now
    out: Callable[[str], None] = print
    store_factory: Callable[[], StateStore] | None = field(default=None)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Runtime:
        env = os.environ if env is None else env
        table = env.get(TABLE_ENV, "")
        if not table:
            raise UsageError(f"{TABLE_ENV}: not set (the hub template sets it on both functions)")
        location = config_store.parse_location(env.get(CONFIG_ENV) or f"dynamodb://{table}")
        return cls(table=table, config_location=location, queue_url=env.get(QUEUE_ENV, ""))

    def open_store(self) -> StateStore:
        if self.store_factory is not None:
            return self.store_factory()
        return DynamoDBStore(self.table, client=self.client_for("dynamodb", None))

    def log(self, level: str, message: str, **fields: Any) -> None:
        self.out(observe.dumps({"level": level, "at": self.now().isoformat(), "message": message, **fields}))


# ---- orchestrator --------------------------------------------------------------------------------


def orchestrate(runtime: Runtime) -> dict[str, Any]:
    if not runtime.queue_url:
        raise UsageError(f"{QUEUE_ENV}: not set (the hub template sets it on the orchestrator)")
    fleet = config_store.load(runtime.config_location, runtime.client_for)
    jobs = jobs_for(fleet, runtime.now())
    sqs = runtime.client_for("sqs", None)
    for batch in batches(jobs):
        entries = [{"Id": str(i), "MessageBody": encode_job(job)} for i, job in enumerate(batch)]
        try:
            answer = sqs.send_message_batch(QueueUrl=runtime.queue_url, Entries=entries)
        except (ClientError, BotoCoreError) as exc:
            raise AwsError(f"orchestrator: cannot queue targets: {exc}") from None
        failed = {int(f["Id"]): f for f in answer.get("Failed", [])}
        for i, job in enumerate(batch):
            if i in failed:
                runtime.log(
                    "ERROR",
                    "target not queued",
                    account=job.account,
                    region=job.region,
                    error=failed[i].get("Message", failed[i].get("Code", "")),
                )
            else:
                runtime.log("INFO", "target queued", account=job.account, region=job.region)
        if failed:
            # Lambda retries the whole orchestrator run; targets queued twice are harmless (leases).
            raise AwsError(f"orchestrator: {len(failed)} target(s) could not be queued")
    return {"targets": len(jobs), "queued": len(jobs)}


def orchestrator(event: Mapping[str, Any], context: Any, runtime: Runtime | None = None) -> dict[str, Any]:
    """Lambda handler: ``hyperpod_scheduler.deploy.handlers.orchestrator``."""
    return orchestrate(runtime or Runtime.from_env())


# ---- worker --------------------------------------------------------------------------------------


def work(job: TargetJob, runtime: Runtime) -> WorkerReport:
    sts = runtime.client_for("sts", job.region)
    session = credentials.assume(sts, job.role_arn, job.account, job.region)
    with runtime.open_store() as store:
        return run_job(
            job,
            store=store,
            session=session,
            sagemaker_for=runtime.sagemaker_for,
            now=runtime.now,
            out=runtime.out,
            hub=runtime.client_for,
        )


def worker(event: Mapping[str, Any], context: Any, runtime: Runtime | None = None) -> dict[str, Any]:
    """Lambda handler: ``hyperpod_scheduler.deploy.handlers.worker``.

    Takes an SQS event (``Records``) or, for a manual ``aws lambda invoke``, one job as the event.
    """
    runtime = runtime or Runtime.from_env()
    records = event.get("Records")
    if records is None:
        records = [{"messageId": "direct", "body": encode_job(TargetJob.model_validate(event))}]
    failures: list[dict[str, str]] = []
    for record in records:
        message_id = str(record.get("messageId", ""))
        try:
            job = decode_job(str(record.get("body", "")))
        except UsageError as exc:
            # A malformed message never gets better: drop it (logged) rather than retry it into the DLQ.
            runtime.log("ERROR", str(exc), message_id=message_id)
            continue
        try:
            report = work(job, runtime)
        except UsageError as exc:
            runtime.log("ERROR", str(exc), account=job.account, region=job.region)
            continue
        except (HyperpodSchedulerError, ClientError, BotoCoreError) as exc:
            runtime.log("ERROR", f"target failed, SQS will retry: {exc}", account=job.account, region=job.region)
            failures.append({"itemIdentifier": message_id})
            continue
        errors = sum(1 for r in report.results if r.kind == "error")
        runtime.log(
            "INFO", "target done", account=job.account, region=job.region, clusters=len(report.results), errors=errors
        )
    return {"batchItemFailures": failures}
