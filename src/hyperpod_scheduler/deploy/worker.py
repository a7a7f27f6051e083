"""One worker run: one target (account, region), one reconcile pass over its governed clusters.

Everything AWS-shaped comes in as a function (credentials, SageMaker clients, the store, the clock,
the output line), so the same code runs in Lambda, against moto and the emulator, and in a test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.deploy import observe
from hyperpod_scheduler.deploy.jobs import TargetJob
from hyperpod_scheduler.engine.events import Collector, Event
from hyperpod_scheduler.engine.fleet import Fleet, Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import ClusterRef, Engine, Result
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.store.base import StateStore

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_sagemaker import SageMakerClient

SagemakerFactory = Callable[["boto3.Session", str], "SageMakerClient"]


@dataclass(frozen=True)
class WorkerReport:
    target: str
    results: list[Result]
    counts: observe.TickCounts


def governed_in_account(job: TargetJob, client_for: Callable[[ClusterRef], SageMakerClient]) -> list[Governed]:
    """The target's clusters, keyed by account so two accounts' same-named clusters never share a record."""
    found = Fleet(job.config, client_for).governed()
    return [
        dataclasses.replace(g, ref=ref_for(g.ref.name, g.ref.region or job.region, account=job.account)) for g in found
    ]


def run_job(
    job: TargetJob,
    *,
    store: StateStore,
    session: boto3.Session,
    sagemaker_for: SagemakerFactory,
    now: Callable[[], datetime],
    out: Callable[[str], None],
) -> WorkerReport:
    place = observe.Place(job.account, job.region)
    clients: dict[str, Any] = {}

    def client_for(ref: ClusterRef) -> SageMakerClient:
        region = ref.region or job.region
        if region not in clients:
            clients[region] = sagemaker_for(session, region)
        client: SageMakerClient = clients[region]
        return client

    def log(event: Event) -> None:
        out(observe.dumps(observe.log_line(place, event)))

    events = Collector(forward=log)
    settle = timedelta(minutes=job.config.defaults.settle_timeout_minutes)
    engine = Engine(store, client_for, now, events=events, actor=f"lambda:{job.label}", settle_timeout=settle)
    governed = governed_in_account(job, client_for)
    results = [_one(engine, g, now(), events) for g in governed]
    counts = observe.count(events.events, results, (store.get(g.ref.key) for g in governed))
    out(observe.dumps(observe.emf(place, counts, now())))
    return WorkerReport(job.label, results, counts)


def _one(engine: Engine, g: Governed, now: datetime, events: Collector) -> Result:
    """``tick`` for one cluster, so a store or AWS failure on one never stops the others."""
    try:
        return tick(engine, [g], now)[0]
    except (HyperpodSchedulerError, ClientError, BotoCoreError) as exc:
        message = f"{type(exc).__name__}: {exc}"
        events(Event(now, g.ref.name, "error", message))
        return Result(g.ref.name, "error", message)
