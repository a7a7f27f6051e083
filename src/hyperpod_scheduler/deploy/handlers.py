"""The Lambda entry points, kept thin: read the environment, call the orchestrator or one worker.

- ``orchestrator``: run by an EventBridge Scheduler cron schedule, on the minute. Reads the fleet
  config and queues one SQS message per part of a target (see ``jobs``) unless that part is still
  queued or in flight (``markers``). It does no AWS work per cluster, so a 500-account fleet costs it a
  few BatchGetItem and SendMessageBatch calls.
- ``worker``: an SQS event source (batch size 1 in the template; more works too). Assumes the spoke
  role, runs one reconcile pass for the job, prints one JSON log line per engine event and one EMF
  metrics line, and acts only while the part's marker still carries the job's token (a late or
  superseded message does nothing and says so). A job whose every cluster failed (or whose role
  cannot be assumed) is reported as a batch item failure, to come back after a growing backoff: SQS
  retries it and, after ``maxReceiveCount``, moves it to the dead-letter queue (an alarm watches that). A job with some
  clusters failed succeeds: the next tick tries them again, and the Failures metric is alarmed.

Environment: ``HYPERPOD_SCHEDULER_TABLE`` (state table), ``HYPERPOD_SCHEDULER_QUEUE_URL`` (the work
queue), ``HYPERPOD_SCHEDULER_CONFIG`` (default ``dynamodb://<table>``),
``HYPERPOD_SCHEDULER_MAX_RECEIVES`` (the queue's maxReceiveCount, default 5),
``HYPERPOD_SCHEDULER_RETRY_BACKOFF_SECONDS`` (first retry delay of a failed job, default 60),
``HYPERPOD_SCHEDULER_SCHEDULING_ACTIVE`` (``No``: the pause switch is on, default ``Yes``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.config.check import checkpoint_blocks
from hyperpod_scheduler.deploy import config_store, credentials, observe, organizations, pause_record
from hyperpod_scheduler.deploy.jobs import TargetJob, batches, claim_of, decode_job, encode_job, jobs_for
from hyperpod_scheduler.deploy.markers import (
    DEFAULT_QUEUED_S,
    LOST_AFTER_S,
    RUNNING_LAPSE_S,
    RUNNING_MARGIN_S,
    Claim,
    Held,
    Markers,
    new_token,
)
from hyperpod_scheduler.deploy.worker import MapPool, Pacing, SagemakerFactory, WorkerReport, run_job, thread_map
from hyperpod_scheduler.errors import AwsError, HyperpodSchedulerError, UsageError
from hyperpod_scheduler.store.base import StateStore
from hyperpod_scheduler.store.dynamodb import DynamoDBStore

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_sagemaker import SageMakerClient

TABLE_ENV = "HYPERPOD_SCHEDULER_TABLE"
QUEUE_ENV = "HYPERPOD_SCHEDULER_QUEUE_URL"
CONFIG_ENV = "HYPERPOD_SCHEDULER_CONFIG"
RECEIVES_ENV = "HYPERPOD_SCHEDULER_MAX_RECEIVES"
BACKOFF_ENV = "HYPERPOD_SCHEDULER_RETRY_BACKOFF_SECONDS"
ACTIVE_ENV = "HYPERPOD_SCHEDULER_SCHEDULING_ACTIVE"  # the hub's SchedulingActive: Yes or No
DEFAULT_MAX_RECEIVES = 5  # the template's maxReceiveCount (AWS advises at least 5 for Lambda)
DEFAULT_BACKOFF_S = 60.0
MAX_BACKOFF_S = 900.0  # the work queue's visibility timeout is longer; a retry never waits past this
DEFAULT_RUN_S = 900.0  # a run with no Lambda context (a test, a manual call) is assumed to take at most this


def default_sagemaker(session: boto3.Session, region: str) -> SageMakerClient:
    from botocore.config import Config

    return session.client("sagemaker", region_name=region, config=Config(retries={"mode": "standard"}))


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _env_number(env: Mapping[str, str], name: str, default: float, low: float) -> float:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{name}: {text!r} is not a number") from None
    if not value >= low:
        raise UsageError(f"{name}: {text!r} must be at least {low:g}")
    return value


def _env_switch(env: Mapping[str, str], name: str) -> bool:
    text = env.get(name, "").strip().lower()
    if text in ("", "yes", "true"):
        return True
    if text in ("no", "false"):
        return False
    raise UsageError(f"{name}: {env[name]!r} is not Yes or No")


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
    max_receives: int = DEFAULT_MAX_RECEIVES
    retry_backoff_s: float = DEFAULT_BACKOFF_S
    queued_s: float = DEFAULT_QUEUED_S
    scheduling_active: bool = True  # False: the template's pause switch (SchedulingActive=No)
    # How a worker run keeps time (real in Lambda; the benchmark's simulated clock there).
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    pool: MapPool[Any, Any] = thread_map

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Runtime:
        env = os.environ if env is None else env
        table = env.get(TABLE_ENV, "")
        if not table:
            raise UsageError(f"{TABLE_ENV}: not set (the hub template sets it on both functions)")
        location = config_store.parse_location(env.get(CONFIG_ENV) or f"dynamodb://{table}")
        return cls(
            table=table,
            config_location=location,
            queue_url=env.get(QUEUE_ENV, ""),
            max_receives=int(_env_number(env, RECEIVES_ENV, DEFAULT_MAX_RECEIVES, 1)),
            retry_backoff_s=_env_number(env, BACKOFF_ENV, DEFAULT_BACKOFF_S, 0),
            scheduling_active=_env_switch(env, ACTIVE_ENV),
        )

    def open_store(self) -> StateStore:
        if self.store_factory is not None:
            return self.store_factory()
        return DynamoDBStore(self.table, client=self.client_for("dynamodb", None))

    def markers(self) -> Markers:
        return Markers(self.client_for("dynamodb", None), self.table)

    def log(self, level: str, message: str, **fields: Any) -> None:
        self.out(observe.dumps({"level": level, "at": self.now().isoformat(), "message": message, **fields}))


# ---- orchestrator --------------------------------------------------------------------------------


def orchestrate(runtime: Runtime) -> dict[str, Any]:
    if not runtime.queue_url:
        raise UsageError(f"{QUEUE_ENV}: not set (the hub template sets it on the orchestrator)")
    fleet, version = config_store.load_versioned(runtime.config_location, runtime.client_for)
    if fleet.organization is not None:
        accounts = organizations.member_accounts(runtime.client_for("organizations", None), fleet.organization.parents)
        fleet = fleet.registered(accounts)
    now = runtime.now()
    fanout = jobs_for(fleet, now, version)
    for u in fanout.unqueued:
        runtime.log("ERROR", f"target not queued: {u.why}", target=u.label)
    markers = runtime.markers()
    held = markers.held([job.key for job in fanout.jobs], now)
    paused = _paused(runtime, fleet)
    _record_pause(runtime, fleet, now)
    if paused is not None:
        return _pause(runtime, markers, fanout.jobs, held, paused, now) | {"targets": len(fleet.targets)}
    sqs = runtime.client_for("sqs", None)
    waiting = _Waiting(sqs, runtime.queue_url)
    claimed: list[TargetJob] = []
    for job in fanout.jobs:
        holder = held.get(job.key)
        over = _replaceable(holder, version, now, waiting) if holder is not None else None
        if holder is not None and over is None:
            continue
        token = new_token()
        # One write: claimed as queued before the send (given back if the send fails).
        fresh = markers.claim(
            job.key, token, now, scheduled_at=now, config_version=version, over=holder, state="queued",
            hold_s=runtime.queued_s,
        )  # fmt: skip
        if fresh:
            if holder is not None:
                runtime.log("INFO", f"queued job taken over: {over}", part=job.key, superseded=holder.describe())
            claimed.append(job.model_copy(update={"marker": token}))
    already = len(fanout.jobs) - len(claimed)
    queued = 0
    not_queued = len(fanout.unqueued)
    unreachable: str | None = None
    for batch in batches([(job, encode_job(job)) for job in claimed]):
        entries = [{"Id": str(i), "MessageBody": body} for i, (_, body) in enumerate(batch)]
        try:
            answer = sqs.send_message_batch(QueueUrl=runtime.queue_url, Entries=entries)
        except (ClientError, BotoCoreError) as exc:
            answer = {"Failed": [{"Id": e["Id"], "Message": str(exc)} for e in entries]}
            unreachable = str(exc)
        failed = {int(f["Id"]): f for f in answer.get("Failed", [])}
        for i, (job, _) in enumerate(batch):
            if i in failed:
                # Not on the queue: give the part back so the next tick tries again.
                _quietly(partial(markers.release, job.key, job.marker))
                reason = failed[i].get("Message") or failed[i].get("Code", "")
                runtime.log("ERROR", "target not queued", account=job.account, region=job.region, part=job.key,
                            error=reason)  # fmt: skip
                not_queued += 1
                continue
            queued += 1
            runtime.log("INFO", "target queued", account=job.account, region=job.region, part=job.key)
    runtime.out(observe.dumps(observe.orchestrator_emf(queued, already, not_queued, now)))
    if unreachable is not None:
        # Lambda's Errors metric (alarmed) and the scheduler's retry; markers keep a retry from doubling up.
        raise AwsError(f"orchestrator: cannot queue targets: {unreachable}")
    return {"targets": len(fleet.targets), "parts": len(fanout.jobs), "queued": queued, "in_flight": already,
            "not_queued": not_queued, "config_version": version}  # fmt: skip


def _paused(runtime: Runtime, fleet: Any) -> str | None:
    if not runtime.scheduling_active:
        return "the hub's SchedulingActive is No"
    if fleet.hub.paused:
        return "the fleet config's hub.paused is true"
    return None


def _record_pause(runtime: Runtime, fleet: Any, now: datetime) -> None:
    """Say in the table which pause settings hold, for the faces that read only the table (the stack's
    parameter is in this function's environment alone). A failure to say so never stops the tick."""
    settings = ((pause_record.STACK,) if not runtime.scheduling_active else ()) + (
        (pause_record.CONFIG,) if fleet.hub.paused else ()
    )
    try:
        pause_record.record(runtime.client_for("dynamodb", None), runtime.table, settings, now)
    except HyperpodSchedulerError as exc:
        runtime.log("WARNING", f"the pause is not recorded for the faces: {exc}")


def _pause(
    runtime: Runtime, markers: Markers, jobs: list[TargetJob], held: dict[str, Held], why: str, now: datetime
) -> dict[str, Any]:
    """The pause switch: queue nothing, and withdraw every part still waiting on the queue (its claim
    taken and given back, or cleared if it lapsed, so its message finds none and does nothing). Runs in
    progress finish."""
    withdrawn = 0
    for job in jobs:
        holder = held.get(job.key)
        if holder is None:
            withdrawn += _attempt(partial(markers.clear_lapsed, job.key, now))
            continue
        if holder.state not in ("queued", "retrying"):
            continue
        token = new_token()
        if markers.claim(job.key, token, now, over=holder):
            _quietly(partial(markers.release, job.key, token))
            withdrawn += 1
    runtime.log("WARNING", f"scheduling paused ({why}): nothing queued", withdrawn=withdrawn)
    runtime.out(observe.dumps(observe.orchestrator_emf(0, 0, 0, now, paused=True)))
    return {"targets": len(jobs), "parts": len(jobs), "queued": 0, "in_flight": 0, "not_queued": 0,
            "paused": why, "withdrawn": withdrawn}  # fmt: skip


class _Waiting:
    """Whether any message waits visible on the work queue: asked once a tick, and only when a queued
    marker is old enough that its message should have been taken by now."""

    def __init__(self, sqs: Any, queue_url: str) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self._answer: bool | None = None

    def any(self) -> bool:
        if self._answer is None:
            try:
                attributes = self.sqs.get_queue_attributes(
                    QueueUrl=self.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
                ).get("Attributes", {})
                self._answer = int(attributes.get("ApproximateNumberOfMessages", "1")) > 0
            except (ClientError, BotoCoreError, ValueError):
                self._answer = True  # not known: the markers hold until they expire, as before
        return self._answer


def _replaceable(holder: Held, version: int, now: datetime, waiting: _Waiting) -> str | None:
    """Why a held part may be queued afresh now (None: it stays with its holder). A job no worker holds
    yet is replaced when it was built from an older config, or when its message no longer waits on the
    queue (taken by a worker that died before it said so, or by an invocation Lambda could not run)."""
    if holder.state in ("queued", "retrying") and holder.config_version < version:
        return f"built from config version {holder.config_version}, now {version}"
    if holder.state != "queued":
        return None
    try:
        since = datetime.fromisoformat(holder.since)
    except ValueError:
        return None
    if (now - since).total_seconds() >= LOST_AFTER_S and not waiting.any():
        return f"its message, queued at {holder.since}, no longer waits on the queue"
    return None


def _attempt(step: Callable[[], bool]) -> int:
    """1 if a conditional marker write applied, 0 if not or if it failed (it is tried again next tick)."""
    try:
        return int(step())
    except HyperpodSchedulerError:
        return 0


def _quietly(step: Callable[[], object]) -> None:
    """A marker write that may fail without harm: an unreleased marker only expires later."""
    with contextlib.suppress(HyperpodSchedulerError):
        step()


def orchestrator(event: Mapping[str, Any], context: Any, runtime: Runtime | None = None) -> dict[str, Any]:
    """Lambda handler: ``hyperpod_scheduler.deploy.handlers.orchestrator``."""
    return orchestrate(runtime or Runtime.from_env())


# ---- worker --------------------------------------------------------------------------------------


def _remaining(context: Any) -> Callable[[], float] | None:
    probe = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(probe):
        return None
    return lambda: float(probe()) / 1000.0


def work(job: TargetJob, runtime: Runtime, context: Any = None, beat: Callable[[], None] | None = None) -> WorkerReport:
    sts = runtime.client_for("sts", job.region)
    session = credentials.assume(sts, job.role_arn, job.account, job.region)
    pacing = Pacing(
        clock=runtime.monotonic, sleep=runtime.sleep, remaining_s=_remaining(context), pool=runtime.pool, beat=beat
    )
    with runtime.open_store() as store:
        return run_job(
            job,
            store=store,
            session=session,
            sagemaker_for=runtime.sagemaker_for,
            now=runtime.now,
            out=runtime.out,
            hub=runtime.client_for,
            pacing=pacing,
        )


def backoff_s(runtime: Runtime, receive_count: int) -> float:
    """How long a failed job waits before SQS hands it out again: doubling from the first retry."""
    return min(MAX_BACKOFF_S, runtime.retry_backoff_s * 2.0 ** max(0, receive_count - 1))


@dataclass
class _Delivery:
    record: Mapping[str, Any]
    message_id: str
    receive_count: int


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
        attributes = record.get("attributes") or {}
        try:
            count = max(1, int(attributes.get("ApproximateReceiveCount", 1)))
        except (TypeError, ValueError):
            count = 1
        delivery = _Delivery(record, str(record.get("messageId", "")), count)
        if not _deliver(delivery, runtime, context):
            failures.append({"itemIdentifier": delivery.message_id})
    return {"batchItemFailures": failures}


def _deliver(delivery: _Delivery, runtime: Runtime, context: Any) -> bool:
    """Work one message; False if SQS should hand it out again."""
    body = str(delivery.record.get("body", ""))
    try:
        job = decode_job(body)
    except UsageError as exc:
        # A malformed message (or one of another format) never gets better: drop it (logged) rather than
        # retry it into the DLQ, and give its claim back so the next tick queues the part afresh.
        held = claim_of(body)
        if held is not None:
            _quietly(partial(runtime.markers().release, *held))
        released = f"; its claim on {held[0]} released" if held is not None else ""
        runtime.log("ERROR", f"{exc}{released}", message_id=delivery.message_id)
        return True
    where = {"account": job.account, "region": job.region, "part": job.key, "attempt": delivery.receive_count}
    if not runtime.scheduling_active:
        if job.marker:
            _quietly(partial(runtime.markers().release, job.key, job.marker))
        runtime.log("WARNING", "scheduling paused (the hub's SchedulingActive is No): nothing done", **where)
        return True
    claim = _claim(job, runtime, context) if job.marker else None
    if claim is not None:
        stale = claim.take()
        if stale is not None:
            # A late redelivery: a newer job (or config) owns the part, so this one's config is old.
            runtime.log("WARNING", f"stale message, nothing done: {stale}", **where,
                        scheduled_at=job.scheduled_at.isoformat(), config_version=job.config_version)  # fmt: skip
            return True
    try:
        report = work(job, runtime, context, beat=claim.beat if claim is not None else None)
    except UsageError as exc:
        runtime.log("ERROR", str(exc), **where)
        _release(claim)
        return True
    except (HyperpodSchedulerError, ClientError, BotoCoreError) as exc:
        return _retry(delivery, runtime, claim, job, f"target failed: {exc}", where)
    if report.all_failed:
        return _retry(delivery, runtime, claim, job, f"every one of {len(report.results)} cluster(s) failed", where)
    _release(claim)
    runtime.log(
        "INFO", "target done", **where, clusters=len(report.results), errors=report.errors,
        deferred=report.counts.deferred, throttles=report.counts.throttles,
    )  # fmt: skip
    return True


def _claim(job: TargetJob, runtime: Runtime, context: Any) -> Claim:
    """The job's hold on its part, renewed as the run goes. A job that audits checkpoints may wait on the
    agent without a call for most of its run, so it holds the part for the whole run instead."""
    lapse = RUNNING_LAPSE_S
    if any(True for _ in checkpoint_blocks(job.config)):
        remaining = _remaining(context)
        lapse = max(lapse, (remaining() if remaining is not None else DEFAULT_RUN_S) + RUNNING_MARGIN_S)
    return Claim(runtime.markers(), job.key, job.marker, runtime.now, runtime.monotonic, lapse_s=lapse)


def _release(claim: Claim | None) -> None:
    if claim is not None:
        claim.release()


def _retry(
    delivery: _Delivery, runtime: Runtime, claim: Claim | None, job: TargetJob, why: str, where: dict[str, Any]
) -> bool:
    if delivery.receive_count >= runtime.max_receives:
        # SQS moves it to the dead-letter queue at its next receive (alarmed): make that now rather than
        # after the queue's long visibility timeout. The next tick may queue the part afresh.
        runtime.log("ERROR", f"{why}; attempt {delivery.receive_count} of {runtime.max_receives}: to the DLQ", **where)
        _release(claim)
        _visible_in(runtime, delivery, 0, where)
        return False
    delay = backoff_s(runtime, delivery.receive_count)
    runtime.log("ERROR", f"{why}; SQS retries it in {delay:.0f} s", **where)
    if claim is not None:
        until = runtime.now() + timedelta(seconds=delay + runtime.queued_s)
        _quietly(partial(claim.markers.mark, job.key, job.marker, "retrying", until))
    _visible_in(runtime, delivery, delay, where)
    return False


def _visible_in(runtime: Runtime, delivery: _Delivery, seconds: float, where: dict[str, Any]) -> None:
    receipt = delivery.record.get("receiptHandle")
    if not runtime.queue_url or not receipt:
        return
    try:
        runtime.client_for("sqs", None).change_message_visibility(
            QueueUrl=runtime.queue_url, ReceiptHandle=str(receipt), VisibilityTimeout=int(seconds)
        )
    except (ClientError, BotoCoreError) as exc:  # the queue's own visibility timeout applies instead
        runtime.log("WARNING", f"cannot set when SQS hands it out again: {exc}", **where)
