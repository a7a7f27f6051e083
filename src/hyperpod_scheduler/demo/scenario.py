"""The demo fleet: three example clusters, one per lifecycle tier, each on its own schedule."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hyperpod_scheduler.errors import UsageError


@dataclass(frozen=True)
class DemoCluster:
    spec_file: str  # under examples/
    schedule: str  # a name in SCHEDULES
    story: str


CLUSTERS = (
    DemoCluster("p5-continuous-ami.yaml", "training-hours", "P5 training, AMI-based, Continuous provisioning"),
    DemoCluster("g5-dev-extension.yaml", "berlin-office", "G5 development, AMI + extension script"),
    DemoCluster("trn1-legacy-custom.yaml", "research-cron", "Trn1 research, custom scripts, legacy topology"),
)

SCHEDULES: dict[str, Any] = {
    "training-hours": {
        "windows": ["Mon-Fri 07:00-21:00"],
        "timezone": "America/Los_Angeles",
        "holidays": "US-CA",
    },
    # Ready by 08:00 in Berlin: the start is issued early by a lead learned from g5-dev's own starts.
    "berlin-office": {
        "windows": ["Mon-Fri 08:00-19:00"],
        "timezone": "Europe/Berlin",
        "holidays": "DE-BE",
        "ready_by": True,
    },
    "research-cron": {"timezone": "UTC", "start": ["0 6 * * 1-6"], "stop": ["0 22 * * 1-6"]},
}

# Sunday noon: the clusters are created and come up before the week starts.
VIRTUAL_START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

# Wednesday morning someone else takes most of the region's G5 capacity for an hour: g5-dev's early
# ready-by start (for 08:00 Berlin, 07:00 UTC; all-or-nothing) rolls back and is retried until the pool
# refills, and is late that one morning; every other morning it is ready before 08:00.
CAPACITY: dict[str, Any] = {
    "instance_types": {
        "ml.g5.12xlarge": {
            "available": 64,
            "schedule": [
                {"at": "2026-12-02T06:00:00Z", "available": 3},
                {"at": "2026-12-02T07:10:00Z", "available": 64},
            ],
        }
    }
}


# The account's shared storage, as the emulator holds it before the week starts. Each file system is
# found the way a real cluster would name it, and the report says which way: p5-training mounts its
# FSx through InstanceStorageConfigs (the way AWS recommends now) and the config also lists it (one
# file system, two sources); trn1-research's legacy lifecycle scripts name theirs in
# provisioning_parameters.json, uploaded to its lifecycle bucket; g5-dev's scratch file system only
# carries the hyperpod-scheduler:cluster tag. FSx bills whether or not a cluster is stopped.
@dataclass(frozen=True)
class DemoFileSystem:
    cluster: str
    file_system_id: str
    storage_capacity: int  # GiB
    deployment_type: str
    throughput: int | None  # MB/s per TiB
    tagged: bool = False
    mounted: bool = False  # named in every group's InstanceStorageConfigs
    configured: bool = False  # listed under cost.fsx.file_systems


FILE_SYSTEMS = (
    DemoFileSystem("p5-training", "fs-0a1b2c3d4e5f60718", 12000, "PERSISTENT_2", 250, mounted=True, configured=True),
    DemoFileSystem("trn1-research", "fs-0123456789abcdef0", 4800, "PERSISTENT_2", 125),
    DemoFileSystem("g5-dev", "fs-0fedcba9876543210", 1200, "SCRATCH_2", None, tagged=True),
)
# Lifecycle buckets the account already has (cluster creation uploads the example scripts there).
BUCKETS = ("sagemaker-g5-dev-lifecycle", "sagemaker-trn1-research-lifecycle")
# An FSx mount needs the cluster in a VPC of its own.
VPC = {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]}


def with_mounts(request: dict[str, Any], region: str) -> dict[str, Any]:
    """``request`` with the cluster's mounted file systems in every group's InstanceStorageConfigs."""
    mounted = [f for f in FILE_SYSTEMS if f.cluster == request["ClusterName"] and f.mounted]
    if not mounted:
        return request
    for group in request["InstanceGroups"]:
        configs = list(group.get("InstanceStorageConfigs") or [])
        for i, fs in enumerate(mounted):
            dns = f"{fs.file_system_id}.fsx.{region}.amazonaws.com"
            path = "/fsx" if i == 0 else f"/fsx{i}"
            configs.append({"FsxLustreConfig": {"DnsName": dns, "MountName": "fsx", "MountPath": path}})
        group["InstanceStorageConfigs"] = configs
    request.setdefault("VpcConfig", VPC)
    return request


def configured_file_systems() -> dict[str, list[str]]:
    """The demo config's ``cost.fsx.file_systems``."""
    out: dict[str, list[str]] = {}
    for fs in FILE_SYSTEMS:
        if fs.configured:
            out.setdefault(fs.cluster, []).append(fs.file_system_id)
    return out


def examples_dir(explicit: str | Path | None = None) -> Path:
    """The bundled examples: --examples, else the source checkout's examples/ folder."""
    candidates = [Path(explicit)] if explicit else []
    candidates.append(Path(__file__).resolve().parents[3] / "examples")
    candidates.append(Path.cwd() / "examples")
    for c in candidates:
        if (c / CLUSTERS[0].spec_file).is_file():
            return c
    raise UsageError(
        f"demo: example specs not found (looked in {', '.join(str(c) for c in candidates)}); pass --examples DIR"
    )


# Tuesday evening a researcher's Trn1 job is still running and checkpoints to instance-local NVMe,
# which dies with the instance: the checkpoint audit blocks Tuesday's 22:00 stop. The job ends
# Wednesday morning, so Wednesday's stop goes ahead.
@dataclass(frozen=True)
class NvmeJob:
    cluster: str
    group: str
    nodes: tuple[str, ...]
    job_id: str
    name: str
    user: str
    partition: str
    comment: str
    runs_from: datetime
    runs_until: datetime
    other_nodes: dict[str, tuple[str, ...]]  # the cluster's other groups (legacy: no SlurmConfig to read)


NVME_JOB = NvmeJob(
    cluster="trn1-research",
    group="trn1-workers",
    nodes=("trn1-1", "trn1-2", "trn1-3", "trn1-4"),
    job_id="4711",
    name="llama-pretrain",
    user="ana",
    partition="trn1",
    comment="ckpt:/opt/dlami/nvme/checkpoints",
    runs_from=datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
    runs_until=datetime(2026, 12, 2, 10, 0, tzinfo=UTC),
    other_nodes={"controller-machine": ("trn1-ctl",), "login-group": ("trn1-login",)},
)
