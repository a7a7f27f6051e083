"""One worker run: one job (a target, or one part of a large one), one reconcile pass over its clusters.

Everything AWS-shaped comes in as a function (credentials, SageMaker clients, the hub's own clients,
the store, the clock, the output line), so the same code runs in Lambda, against moto and the
emulator, in a test, and on the fleet benchmark's simulated clock. The engine is built by the
composition root the CLI uses, so the worker honours every setting of the config the CLI does.

What the worker adds around the engine:

- its clusters run ``defaults.concurrency`` at a time, and every SageMaker call of the run waits for
  a token of the run's per-(account, region) buckets (``deploy/throttle.py``), shared by all threads;
- a cluster is not started when the run is about to reach its Lambda timeout: it is *deferred*, left
  for the next tick, instead of being cut off in the middle of its action;
- a job that carries part of a target sees only its part of the account: its own named clusters, and
  of the tag-selected ones only its shard (the others' names never reach its ListTags calls).
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from hyperpod_scheduler.app.compose import Clients, Context
from hyperpod_scheduler.deploy import observe
from hyperpod_scheduler.deploy.jobs import TargetJob
from hyperpod_scheduler.deploy.recent import Recent
from hyperpod_scheduler.deploy.throttle import Rate, SagemakerLimiter, TokenBucket
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
T = TypeVar("T")
R = TypeVar("R")
# Runs fn over items with at most n at once, results in order (a thread pool; the benchmark's own).
MapPool = Callable[[Callable[[T], R], Sequence[T], int], list[R]]
# No cluster is started with less than this left of the run: one cluster's describe, guards and update.
DEFER_MARGIN_S = 45.0
DEFERRED = "deferred"


def thread_map(fn: Callable[[T], R], items: Sequence[T], n: int) -> list[R]:
    if n <= 1 or len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(n, len(items)), thread_name_prefix="cluster") as pool:
        return list(pool.map(fn, items))


@dataclass(frozen=True)
class Pacing:
    """How the run keeps time: the clock and sleep of its token buckets, and the time left to it."""

    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    remaining_s: Callable[[], float] | None = None  # None: no deadline (a manual invoke, a test)
    rng: random.Random | None = None
    pool: MapPool[Any, Any] = thread_map
    # Called at every SageMaker call and cluster turn: the run is alive (renews its claim on the part).
    beat: Callable[[], None] | None = None


@dataclass(frozen=True)
class WorkerReport:
    target: str
    results: list[Result]
    counts: observe.TickCounts

    @property
    def errors(self) -> int:
        return sum(1 for r in self.results if r.kind == "error")

    @property
    def all_failed(self) -> bool:
        """Every cluster the job governs ended in an error: worth retrying the whole job (then the DLQ).
        A start that settled short is not one: the engine retries it on its own schedule."""
        return bool(self.results) and all(r.kind == "error" for r in self.results)


def _explicit(job: TargetJob) -> set[str]:
    return {e.name for t in job.config.targets for e in t.clusters}


def governed_in_account(job: TargetJob, ctx: Context) -> list[Governed]:
    """The job's clusters, keyed by account so two accounts' same-named clusters never share a record."""
    explicit = _explicit(job)
    return [
        dataclasses.replace(
            g,
            ref=ref_for(g.ref.name, g.ref.region or job.region, account=job.account).governed(g.ref.settings),
            looks_first=False,  # the job names the account: no first look decides whose cluster it is
        )
        for g in ctx.fleet().governed()
        if job.governs(g.ref.name, g.ref.name in explicit)
    ]


def limiter_for(job: TargetJob, pacing: Pacing) -> SagemakerLimiter:
    rates = job.rates

    def bucket(per_second: float) -> TokenBucket:
        rate = Rate(per_second, rates.burst)
        return TokenBucket(rate, clock=pacing.clock, sleep=pacing.sleep, jitter=rates.jitter, rng=pacing.rng)

    return SagemakerLimiter(
        updates=bucket(rates.updates_per_second), reads=bucket(rates.reads_per_second), on_call=pacing.beat
    )


def _part_view(job: TargetJob, client: Any) -> None:
    """Discovery sees only this job's share: ListClusters answers lose the clusters named explicitly (they
    are governed anyway) and those of other parts, so no ListTags call is spent on them."""
    if job.part.count == 1:
        return
    explicit = _explicit(job)

    def trim(parsed: Any = None, **_: Any) -> None:
        if isinstance(parsed, dict) and isinstance(parsed.get("ClusterSummaries"), list):
            parsed["ClusterSummaries"] = [
                s
                for s in parsed["ClusterSummaries"]
                if not isinstance(s, dict)
                or (s.get("ClusterName") not in explicit and job.governs(str(s.get("ClusterName")), False))
            ]

    events = getattr(getattr(client, "meta", None), "events", None)
    if events is not None:
        events.register("after-call.sagemaker.ListClusters", trim, unique_id=f"hps-part-view-{id(job)}")


def target_clients(
    job: TargetJob,
    session: boto3.Session,
    sagemaker_for: SagemakerFactory,
    hub: HubClients,
    limiters: Callable[[str], SagemakerLimiter] | None = None,
) -> Clients:
    """SageMaker and an ``s3://`` checkpoint channel in the target account (the assumed spoke role), the
    SageMaker one paced by the run's token buckets; SNS with the worker's own role (the hub's topic)."""
    made: dict[tuple[str, str], Any] = {}
    lock = threading.Lock()

    def in_target(service: str, region: str) -> Any:
        with lock:  # one client per service and region for all of the run's threads (and one limiter)
            return made[(service, region)] if (service, region) in made else make(service, region)

    def make(service: str, region: str) -> Any:
        client: Any
        if service == "sagemaker":
            client = sagemaker_for(session, region)
            if limiters is not None:
                limiters(region).attach(client)
            _part_view(job, client)
        else:
            client = session.client("s3", region_name=region)
        made[(service, region)] = client
        return client

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
    pacing: Pacing | None = None,
) -> WorkerReport:
    pacing = pacing or Pacing()
    place = observe.Place(job.account, job.region)

    def log(event: Event) -> None:
        out(observe.dumps(observe.log_line(place, event)))

    def warn(message: str) -> None:
        line = {"level": "WARNING", "at": now().isoformat(), "account": job.account, "region": job.region}
        out(observe.dumps({**line, "message": message}))

    def no_hub(service: str, region: str | None) -> Any:
        raise UsageError(f"the worker was given no client for {service} in the hub")

    limiters: dict[str, SagemakerLimiter] = {}

    def limiter(region: str) -> SagemakerLimiter:
        # Called under target_clients' lock, once per region: every thread of the run shares it.
        return limiters.setdefault(region, limiter_for(job, pacing))

    concurrency = job.config.defaults.concurrency
    events = Collector(forward=log)
    recent = Recent(store)
    ctx = Context(
        job.config,
        recent.as_store(),
        target_clients(job, session, sagemaker_for, hub or no_hub, limiter),
        now,
        events,
        actor=f"lambda:{job.label}",
        warn=warn,
    )
    try:
        governed = governed_in_account(job, ctx)
        for problem in ctx.fleet().problems:
            warn(_problem_text(problem))
        engine = ctx.engine()

        def left_for_later(g: Governed) -> Result | None:
            if pacing.beat is not None:
                pacing.beat()
            left = pacing.remaining_s() if pacing.remaining_s is not None else None
            if left is not None and left < DEFER_MARGIN_S:
                return Result(g.ref.name, DEFERRED, f"left for the next run: {left:.0f} s of this run remained")
            return None

        def pool(one: Callable[[Governed], Result], clusters: Sequence[Governed]) -> list[Result]:
            # The worker's own pool runs the turns (it stops starting them near its deadline); each turn's
            # failure is caught by the fleet's one place (``fleet.caught``).
            return pacing.pool(lambda g: left_for_later(g) or one(g), clusters, concurrency)

        results = ctx.tick(governed, engine=engine, pool=pool)
        deferred = [r.cluster for r in results if r.kind == DEFERRED]
        if deferred:
            warn(f"{len(deferred)} cluster(s) left for the next run, the run being near its timeout: {deferred[:10]}")
        counts = observe.count(
            events.events,
            results,
            (recent.last(g.ref.key) for g in governed),  # what each turn saw: no second read
            throttles=sum(lim.throttles for lim in limiters.values()),
        )
    finally:
        ctx.close()
    out(observe.dumps(observe.emf(place, counts, now(), per_account=job.metrics_per_account)))
    return WorkerReport(job.label, results, counts)


def _problem_text(problem: object) -> str:
    if isinstance(problem, tuple) and len(problem) == 2:
        return f"cluster '{problem[0]}' skipped: {problem[1]}"
    return str(problem)


__all__ = ["DEFERRED", "HubClients", "Pacing", "SagemakerFactory", "WorkerReport", "governed_in_account", "run_job"]
