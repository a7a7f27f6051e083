"""One worker run: one target (account, region), one reconcile pass over its governed clusters.

Everything AWS-shaped comes in as a function (credentials, SageMaker clients, the hub's own clients,
the store, the clock, the output line), so the same code runs in Lambda, against moto and the
emulator, and in a test. The engine is built by the composition root the CLI uses, so the worker
honours every setting of the config the CLI does (guards, floors, checkpoints, retry, lease, ready-by,
concurrency, notifications).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyperpod_scheduler.app.compose import Clients, Context
from hyperpod_scheduler.deploy import observe
from hyperpod_scheduler.deploy.jobs import TargetJob
from hyperpod_scheduler.engine.events import Collector, Event
from hyperpod_scheduler.engine.fleet import Governed, ref_for
from hyperpod_scheduler.engine.runner import Result
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store.base import StateStore

if TYPE_CHECKING:
    from datetime import datetime

    import boto3
    from mypy_boto3_sagemaker import SageMakerClient

SagemakerFactory = Callable[["boto3.Session", str], "SageMakerClient"]
HubClients = Callable[[str, str | None], Any]  # (service, region) -> a client with the worker's own role


@dataclass(frozen=True)
class WorkerReport:
    target: str
    results: list[Result]
    counts: observe.TickCounts


def governed_in_account(job: TargetJob, ctx: Context) -> list[Governed]:
    """The target's clusters, keyed by account so two accounts' same-named clusters never share a record."""
    return [
        dataclasses.replace(g, ref=ref_for(g.ref.name, g.ref.region or job.region, account=job.account))
        for g in ctx.fleet().governed()
    ]


def target_clients(job: TargetJob, session: boto3.Session, sagemaker_for: SagemakerFactory, hub: HubClients) -> Clients:
    """SageMaker and an ``s3://`` checkpoint channel in the target account (the assumed spoke role);
    SNS with the worker's own role (the topic lives in the hub)."""
    made: dict[tuple[str, str], Any] = {}

    def in_target(service: str, region: str) -> Any:
        if (service, region) not in made:
            made[(service, region)] = (
                sagemaker_for(session, region) if service == "sagemaker" else session.client("s3", region_name=region)
            )
        return made[(service, region)]

    def no_prices() -> Any:
        raise UsageError("the fleet worker prices nothing (run `report` from the CLI)")

    return Clients(
        sagemaker=lambda ref: in_target("sagemaker", ref.region or job.region),
        s3=lambda ref: in_target("s3", ref.region or job.region),
        sns=lambda region: hub("sns", region or job.region),
        pricing=no_prices,
    )


def run_job(
    job: TargetJob,
    *,
    store: StateStore,
    session: boto3.Session,
    sagemaker_for: SagemakerFactory,
    now: Callable[[], datetime],
    out: Callable[[str], None],
    hub: HubClients | None = None,
) -> WorkerReport:
    place = observe.Place(job.account, job.region)

    def log(event: Event) -> None:
        out(observe.dumps(observe.log_line(place, event)))

    def warn(message: str) -> None:
        line = {"level": "WARNING", "at": now().isoformat(), "account": job.account, "region": job.region}
        out(observe.dumps({**line, "message": message}))

    def no_hub(service: str, region: str | None) -> Any:
        raise UsageError(f"the worker was given no client for {service} in the hub")

    events = Collector(forward=log)
    ctx = Context(
        job.config,
        store,
        target_clients(job, session, sagemaker_for, hub or no_hub),
        now,
        events,
        actor=f"lambda:{job.label}",
        warn=warn,
    )
    try:
        governed = governed_in_account(job, ctx)

        def failed(g: Governed, exc: Exception) -> Result:
            # A store or AWS failure on one cluster never stops the others.
            message = f"{type(exc).__name__}: {exc}"
            ctx.events(Event(now(), g.ref.name, "error", message))
            return Result(g.ref.name, "error", message)

        results = ctx.tick(governed, on_error=failed)
        counts = observe.count(events.events, results, (store.get(g.ref.key) for g in governed))
    finally:
        ctx.close()
    out(observe.dumps(observe.emf(place, counts, now())))
    return WorkerReport(job.label, results, counts)


__all__ = ["HubClients", "SagemakerFactory", "WorkerReport", "governed_in_account", "run_job"]
