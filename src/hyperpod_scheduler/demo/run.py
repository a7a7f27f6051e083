"""Run the demo: create the fleet in the emulator, then tick the scheduler across a virtual week."""

from __future__ import annotations

import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hyperpod_scheduler.agent.settings import CheckpointSettings
from hyperpod_scheduler.agent.worker import SlurmSide
from hyperpod_scheduler.app import report as reports
from hyperpod_scheduler.app.compose import Clients, Context, LocalAgent
from hyperpod_scheduler.aws.clients import AwsClients, plain_client
from hyperpod_scheduler.cluster.create import create_cluster
from hyperpod_scheduler.cluster.load import load_report
from hyperpod_scheduler.config.model import ClusterEntry, Config, Defaults, Target
from hyperpod_scheduler.cost.savings import Report
from hyperpod_scheduler.cost.settings import CostSettings, FsxSettings
from hyperpod_scheduler.demo.scenario import (
    BUCKETS,
    CAPACITY,
    CLUSTERS,
    FILE_SYSTEMS,
    NVME_JOB,
    SCHEDULES,
    VIRTUAL_START,
    DemoCluster,
    configured_file_systems,
    examples_dir,
    with_mounts,
)
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.engine.events import Collector, Event, Sink
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.guards.checkpoints import LocalLink
from hyperpod_scheduler.slurm.memory import MemorySlurm
from hyperpod_scheduler.slurm.model import SlurmJob, SlurmNode
from hyperpod_scheduler.store import open_store

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

REGION = "us-east-1"


@dataclass
class ClusterSummary:
    name: str
    schedule: str
    story: str
    stops: int = 0
    starts: int = 0
    restores: int = 0
    failures: int = 0
    instance_hours: float = 0.0
    always_on_hours: float = 0.0
    recorded: dict[str, int] = field(default_factory=dict)
    restored: dict[str, str] = field(default_factory=dict)
    # Ready-by schedules: mornings ready when the day began, of all mornings, and the lead now.
    ready_on_time: int = 0
    ready_mornings: int = 0
    lead: str = ""

    @property
    def saved_pct(self) -> float:
        return 0.0 if not self.always_on_hours else 100 * (1 - self.instance_hours / self.always_on_hours)


@dataclass
class DemoResult:
    clusters: list[ClusterSummary]
    events: list[Event]
    virtual_days: float
    endpoint: str
    report: Report


def _client(endpoint: str) -> SageMakerClient:
    client: SageMakerClient = plain_client("sagemaker", endpoint, REGION)
    return client


def stock_storage(emu: Emulator) -> None:
    """What the demo account holds before the week: lifecycle buckets and FSx file systems."""
    assert emu.storage is not None, "the emulator serves S3 and FSx beside HyperPod"
    for bucket in BUCKETS:
        emu.storage.s3.create_bucket(bucket)
    for fs in FILE_SYSTEMS:
        emu.storage.fsx.add(
            region=REGION,
            file_system_id=fs.file_system_id,
            storage_capacity=fs.storage_capacity,
            deployment_type=fs.deployment_type,
            throughput=fs.throughput,
            tags={"hyperpod-scheduler:cluster": fs.cluster} if fs.tagged else None,
        )


def create_fleet(emu: Emulator, client: SageMakerClient, folder: Path) -> list[tuple[DemoCluster, dict[str, Any]]]:
    """Create the example clusters as a user would: lifecycle scripts (and the legacy cluster's
    provisioning_parameters.json) uploaded to their buckets first, through the emulator's S3."""
    s3 = AwsClients(emu.endpoint).client("s3", region=REGION)
    created = []
    for c in CLUSTERS:
        report = load_report(folder / c.spec_file)
        report.raise_for_errors(str(folder / c.spec_file))
        with_mounts(report.request, REGION)
        scripts = folder / "lifecycle-scripts"
        has_scripts = any((g.get("LifeCycleConfig") or {}).get("SourceS3Uri") for g in report.request["InstanceGroups"])
        create_cluster(report, client, s3=s3 if has_scripts else None, scripts=scripts if has_scripts else None)
        created.append((c, report.request))
    return created


def emulator_clients(sagemaker: SageMakerClient, aws: AwsClients) -> Clients:
    """Every client of the demo's context against its embedded emulator (S3 for Slurm roles and
    checkpoints included): nothing the demo runs may even try real AWS, whatever the environment says."""
    return Clients(
        sagemaker=lambda ref: sagemaker,
        s3=lambda ref: aws.client("s3", region=ref.region or REGION),
        sns=lambda region: aws.client("sns", region=region or REGION),
        pricing=lambda: aws.client("pricing", region=REGION),
    )


def demo_cost() -> CostSettings:
    """The demo config's ``cost:`` section: bundled prices, FSx discovery on, one file system listed."""
    return CostSettings(fsx=FsxSettings(file_systems=configured_file_systems()))


def _wait_in_service(emu: Emulator, client: SageMakerClient, names: list[str], limit_s: float = 6 * 3600) -> None:
    waited = 0.0
    while waited < limit_s:
        answers = {n: client.describe_cluster(ClusterName=n) for n in names}
        states = {n: a["ClusterStatus"] for n, a in answers.items()}
        settled = all(
            a["ClusterStatus"] == "InService"
            and all(g["CurrentCount"] == g.get("TargetCount", g["CurrentCount"]) for g in a["InstanceGroups"])
            for a in answers.values()
        )
        if settled:
            return
        failed = [n for n, s in states.items() if s == "Failed"]
        if failed:
            raise HyperpodSchedulerError(f"demo: cluster(s) {failed} failed to create in the emulator")
        emu.advance(60)
        waited += 60
    raise HyperpodSchedulerError("demo: clusters did not reach InService in six virtual hours")


def _counts(emu: Emulator, name: str) -> dict[str, int]:
    answer = emu.backend.dispatch("DescribeCluster", {"ClusterName": name}, region=REGION)
    return {g["InstanceGroupName"]: int(g.get("CurrentCount", 0)) for g in answer["InstanceGroups"]}


def _nvme_slurm() -> MemorySlurm:
    nodes = [SlurmNode(n, "idle", "", "", (NVME_JOB.partition,)) for n in NVME_JOB.nodes]
    nodes += [SlurmNode(n, "idle", "", "", ()) for names in NVME_JOB.other_nodes.values() for n in names]
    return MemorySlurm(nodes_=nodes)


def _run_nvme_job(slurm: MemorySlurm, now: datetime) -> None:
    """The researcher's job runs on the Trn1 workers from Tuesday noon to Wednesday 10:00."""
    job = NVME_JOB
    running = job.runs_from <= now < job.runs_until
    if running and not slurm.jobs_:
        slurm.jobs_ = [SlurmJob(job.job_id, job.name, "RUNNING", job.user, job.partition, job.nodes, job.comment)]
    elif not running and slurm.jobs_:
        slurm.jobs_ = []


def run_demo(
    *,
    days: float = 7.0,
    step_minutes: float = 10.0,
    seed: int = 7,
    examples: str | Path | None = None,
    events: Sink | None = None,
    on_ready: Callable[[str], None] | None = None,
    on_finish: Callable[[DemoResult, Emulator, Config, str], None] | None = None,
) -> DemoResult:
    folder = examples_dir(examples)
    collector = Collector(events) if events else Collector()
    with (
        running_emulator(virtual_start=VIRTUAL_START, seed=seed, capacity=CAPACITY) as emu,
        tempfile.TemporaryDirectory() as tmp,
    ):
        client = _client(emu.endpoint)
        stock_storage(emu)
        requests = create_fleet(emu, client, folder)
        names = [r["ClusterName"] for _, r in requests]
        _wait_in_service(emu, client, names)
        if on_ready:
            on_ready(emu.endpoint)
        nvme_checkpoints = CheckpointSettings(
            policy="block",
            nodes={NVME_JOB.group: list(NVME_JOB.nodes), **{g: list(n) for g, n in NVME_JOB.other_nodes.items()}},
        )
        config = Config(
            # One cluster at a time: the emulator's draws are one sequence, so the same seed gives the
            # same week only if the clusters' calls come in the same order.
            defaults=Defaults(settle_timeout_minutes=120, concurrency=1),
            schedules=SCHEDULES,
            targets=[
                Target(
                    region=REGION,
                    clusters=[
                        ClusterEntry(
                            name=r["ClusterName"],
                            schedule=c.schedule,
                            checkpoints=nvme_checkpoints if r["ClusterName"] == NVME_JOB.cluster else None,
                        )
                        for c, r in requests
                    ],
                )
            ],
            cost=demo_cost(),
        )
        store = open_store(str(Path(tmp) / "state.sqlite"))
        clock = emu.clock.now
        # The researcher's Slurm lives in this process: the audit asks it directly, on the virtual clock.
        slurm = _nvme_slurm()
        side = SlurmSide(slurm, now=clock)
        ctx = Context(
            config,
            store,
            emulator_clients(client, AwsClients(emu.endpoint)),
            clock,
            collector,
            actor="demo",
            sleep=emu.advance,
            agent=LocalAgent(link_for=lambda ref, settings: LocalLink(side), now=clock),
            notify=False,  # nothing the demo runs may reach real AWS, whatever the environment says
        )
        engine = ctx.engine()
        governed = ctx.fleet().governed()
        summaries = {r["ClusterName"]: ClusterSummary(r["ClusterName"], c.schedule, c.story) for c, r in requests}
        full = {r["ClusterName"]: sum(g["InstanceCount"] for g in r["InstanceGroups"]) for _, r in requests}
        used: dict[str, float] = defaultdict(float)
        step = timedelta(minutes=step_minutes)
        # Tick on step boundaries (08:00, 08:10, ...), as a cron-driven scheduler would.
        behind = clock().timestamp() % step.total_seconds()
        if behind:
            emu.advance(step.total_seconds() - behind)
        sim_start = clock()
        end = sim_start + timedelta(days=days)
        while clock() < end:
            _run_nvme_job(slurm, clock())
            ctx.tick(governed, engine=engine)
            emu.advance(step.total_seconds())
            for n in names:
                used[n] += sum(_counts(emu, n).values()) * step.total_seconds() / 3600
        refs = {g.ref.name: g.ref for g in governed}
        for n, s in summaries.items():
            s.instance_hours = used[n]
            s.always_on_hours = full[n] * days * 24
            record = engine.record_of(refs[n]) if n in refs else None
            if record and record.snapshot:
                s.recorded = {g: size.count for g, size in record.snapshot.sizes.items()}
            if record:
                s.restored = {o.group: f"{o.outcome} {o.current}/{o.target}" for o in record.last_outcomes}
        for g in governed:
            if g.schedule.ready_by and g.ref.name in summaries:
                lead = ctx.lead_for(g)
                summaries[g.ref.name].lead = f"{lead.lead.total_seconds() / 60:.0f} min ({lead.why})"
        for e in collector.events:
            s = summaries[e.cluster]
            if e.kind == "sent":
                if e.message.startswith("stop"):
                    s.stops += 1
                else:
                    s.starts += 1
            elif e.kind == "settled" and e.message.startswith("start"):
                s.restores += 1
                ready = e.detail.get("ready_for")
                if isinstance(ready, dict) and SCHEDULES.get(s.schedule, {}).get("ready_by"):
                    s.ready_mornings += 1
                    s.ready_on_time += ready.get("spare_s", -1) >= 0
            elif e.kind in ("failed", "error"):
                s.failures += 1
        # The week's report, as `report` would print it: FSx found through the emulator's own APIs.
        aws = AwsClients(emu.endpoint)
        finder = reports.FileSystemFinder(config, lambda region, profile: client, aws)
        report = reports.build(
            store,
            reports.prices(config.cost.prices, clock(), aws),
            finder,
            sim_start,
            clock(),
            config=config,
        )
        result = DemoResult(list(summaries.values()), collector.events, days, emu.endpoint, report)
        if on_finish is not None:
            # While the emulator and the store still exist (the dashboard can serve them).
            on_finish(result, emu, config, str(Path(tmp) / "state.sqlite"))
        store.close()
        return result


def summary_rows(result: DemoResult) -> list[dict[str, Any]]:
    return [
        {
            "cluster": s.name,
            "schedule": s.schedule,
            "story": s.story,
            "stops": s.stops,
            "starts": s.starts,
            "restores": s.restores,
            "failures": s.failures,
            "instance_hours": round(s.instance_hours, 1),
            "always_on_hours": round(s.always_on_hours, 1),
            "saved_pct": round(s.saved_pct, 1),
            "recorded_sizes": s.recorded,
            "last_outcomes": s.restored,
            **(
                {"ready_by": {"on_time": s.ready_on_time, "mornings": s.ready_mornings, "lead": s.lead}}
                if s.lead
                else {}
            ),
        }
        for s in result.clusters
    ]


__all__ = ["DemoResult", "datetime", "run_demo", "summary_rows"]
