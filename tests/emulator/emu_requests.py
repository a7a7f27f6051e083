"""AWS-shaped request builders shared by the emulator wire tests (a plain module: conftest names collide)."""

from __future__ import annotations

from typing import Any

ROLE = "arn:aws:iam::123456789012:role/hyperpod-execution"
BUCKET = "s3://sagemaker-emulator-tests/lifecycle/"

# The three Slurm node-lifecycle tiers, as the LifeCycleConfig each sends (None: omitted entirely).
LIFECYCLE: dict[str, dict[str, str] | None] = {
    "ami": None,
    "extension": {"SourceS3Uri": BUCKET, "OnInitComplete": "after_ami.sh"},
    "custom": {"SourceS3Uri": BUCKET, "OnCreate": "on_create.sh"},
}


def group(
    name: str,
    instance_type: str,
    count: int,
    node_type: str,
    *,
    tier: str = "ami",
    partition: str | None = None,
    min_count: int | None = None,
) -> dict[str, Any]:
    g: dict[str, Any] = {
        "InstanceGroupName": name,
        "InstanceType": instance_type,
        "InstanceCount": count,
        "ExecutionRole": ROLE,
        "ThreadsPerCore": 1,
        "SlurmConfig": {"NodeType": node_type},
    }
    if node_type == "Compute":
        g["SlurmConfig"]["PartitionNames"] = [partition or name]
    lcc = LIFECYCLE[tier]
    if lcc is not None:
        g["LifeCycleConfig"] = dict(lcc)
    if min_count is not None:
        g["MinInstanceCount"] = min_count
    return g


def create_request(
    name: str,
    *,
    tier: str = "ami",
    continuous: bool = False,
    workers: int = 2,
    worker_type: str = "ml.p5.48xlarge",
    controller_type: str = "ml.t3.medium",
    login: bool = False,
    tags: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Slurm cluster: controller, optional login, one compute group ``gpu`` of ``workers`` nodes."""
    groups = [group("controller", controller_type, 1, "Controller", tier=tier)]
    if login:
        groups.append(group("login", "ml.m5.xlarge", 1, "Login", tier=tier))
    groups.append(group("gpu", worker_type, workers, "Compute", tier=tier, partition="gpu"))
    request: dict[str, Any] = {"ClusterName": name, "InstanceGroups": groups}
    if continuous:
        request["NodeProvisioningMode"] = "Continuous"
        request["Orchestrator"] = {"Slurm": {}}
    if tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
    return request


def update_groups_from(described: dict[str, Any], counts: dict[str, int]) -> list[dict[str, Any]]:
    """Every group re-sent in full as DescribeCluster reports it, with only InstanceCount changed.

    This is the scheduler's safe rule: LifeCycleConfig exactly as it was, absent stays absent.
    """
    keep = (
        "InstanceGroupName",
        "InstanceType",
        "ExecutionRole",
        "ThreadsPerCore",
        "LifeCycleConfig",
        "SlurmConfig",
    )
    out = []
    for g in described["InstanceGroups"]:
        spec = {k: g[k] for k in keep if k in g}
        spec["InstanceCount"] = counts.get(g["InstanceGroupName"], g["TargetCount"])
        out.append(spec)
    return out
