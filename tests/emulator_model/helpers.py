"""Builders and drivers for the model tests: requests in the API shape, a backend on a virtual clock."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from hyperpod_scheduler.emulator.backend import HyperPodBackend
from hyperpod_scheduler.emulator.capacity import CapacityModel
from hyperpod_scheduler.emulator.clock import VirtualClock
from hyperpod_scheduler.emulator.protocol import check_answer

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
ROLE = "arn:aws:iam::123456789012:role/hyperpod-exec"
LCC = {
    "ami": None,
    "extension": {"SourceS3Uri": "s3://sagemaker-demo/lifecycle/", "OnInitComplete": "extend.sh"},
    "custom": {"SourceS3Uri": "s3://sagemaker-demo/lifecycle/", "OnCreate": "on_create.sh"},
}
CAPACITY_FAILURE = "We currently do not have sufficient capacity for the requested instance type(s). Please try again."


def group(
    name: str,
    count: int,
    node_type: str = "Compute",
    instance_type: str = "ml.c5.xlarge",
    tier: str = "ami",
    **extra: Any,
) -> dict[str, Any]:
    g: dict[str, Any] = {
        "InstanceGroupName": name,
        "InstanceType": instance_type,
        "InstanceCount": count,
        "ExecutionRole": ROLE,
        "SlurmConfig": {"NodeType": node_type},
        **extra,
    }
    if node_type == "Compute":
        g["SlurmConfig"]["PartitionNames"] = [name]
    if LCC[tier] is not None:
        g["LifeCycleConfig"] = dict(LCC[tier])  # type: ignore[arg-type]
    return g


def cluster_request(
    name: str = "demo",
    workers: int = 2,
    worker_type: str = "ml.c5.xlarge",
    tier: str = "ami",
    continuous: bool = False,
    login: bool = False,
    **worker_extra: Any,
) -> dict[str, Any]:
    groups = [group("controller", 1, "Controller", "ml.m5.xlarge", tier)]
    if login:
        groups.append(group("login", 1, "Login", "ml.m5.xlarge", tier))
    groups.append(group("gpu", workers, "Compute", worker_type, tier, **worker_extra))
    request: dict[str, Any] = {"ClusterName": name, "InstanceGroups": groups, "Orchestrator": {"Slurm": {}}}
    if continuous:
        request["NodeProvisioningMode"] = "Continuous"
    return request


class CheckedBackend(HyperPodBackend):
    """A backend whose every answer must fit its botocore output shape (the protocol's check mode),
    so any test of the model that gets a non-conforming answer fails right there."""

    def dispatch(self, operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        answer = super().dispatch(operation, params, **kw)
        check_answer(operation, answer)
        return answer


def backend(capacity: dict[str, Any] | None = None, seed: int = 0, **kw: Any) -> HyperPodBackend:
    model = CapacityModel.from_dict(capacity) if capacity is not None else None
    return CheckedBackend(VirtualClock(T0), model, seed=seed, **kw)


def clock(b: HyperPodBackend) -> VirtualClock:
    assert isinstance(b.clock, VirtualClock)
    return b.clock


def describe(b: HyperPodBackend, name: str = "demo") -> dict[str, Any]:
    return b.dispatch("DescribeCluster", {"ClusterName": name})


def groups(b: HyperPodBackend, name: str = "demo") -> dict[str, dict[str, Any]]:
    return {g["InstanceGroupName"]: g for g in describe(b, name)["InstanceGroups"]}


def run_until(b: HyperPodBackend, done: Callable[[], bool], horizon: timedelta = timedelta(hours=12)) -> None:
    """Jump from scheduled change to scheduled change until ``done()`` holds (or fail)."""
    deadline = b.clock.now() + horizon
    for _ in range(20_000):
        if done():
            return
        nxt = b.next_event_time()
        assert nxt is not None, "nothing is scheduled and the condition does not hold"
        assert nxt <= deadline, f"condition still false after {horizon}"
        clock(b).set(max(nxt, b.clock.now()))
        b.process_due()
    raise AssertionError("events keep coming without reaching the condition")


def wait_status(b: HyperPodBackend, status: str, name: str = "demo", **kw: Any) -> dict[str, Any]:
    run_until(b, lambda: describe(b, name)["ClusterStatus"] == status, **kw)
    return describe(b, name)


def statuses_seen(b: HyperPodBackend, until: str, name: str = "demo") -> list[str]:
    seen: list[str] = []

    def done() -> bool:
        status = str(describe(b, name)["ClusterStatus"])
        if not seen or seen[-1] != status:
            seen.append(status)
        return status == until

    run_until(b, done)
    return seen


def resend(described: dict[str, Any], counts: dict[str, int]) -> list[dict[str, Any]]:
    """What the scheduler sends: every group as DescribeCluster reports it, only InstanceCount changed."""
    keep = (
        "InstanceGroupName",
        "InstanceType",
        "ExecutionRole",
        "LifeCycleConfig",
        "ThreadsPerCore",
        "InstanceStorageConfigs",
        "OnStartDeepHealthChecks",
        "SlurmConfig",
        "TrainingPlanArn",
    )
    out = []
    for g in described["InstanceGroups"]:
        spec = {k: copy.deepcopy(g[k]) for k in keep if k in g}
        spec["InstanceCount"] = counts.get(g["InstanceGroupName"], g["TargetCount"])
        if "MinCount" in g:
            spec["MinInstanceCount"] = min(g["MinCount"], spec["InstanceCount"])
        out.append(spec)
    return out


def nodes(b: HyperPodBackend, name: str = "demo", **params: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    token = None
    while True:
        more: dict[str, str] = {"NextToken": token} if token else {}
        page = b.dispatch("ListClusterNodes", {"ClusterName": name, **params, **more})
        out.extend(page["ClusterNodeSummaries"])
        token = page.get("NextToken")
        if not token:
            return out


def events(b: HyperPodBackend, name: str = "demo", **params: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    token = None
    while True:
        more: dict[str, str] = {"NextToken": token} if token else {}
        page = b.dispatch("ListClusterEvents", {"ClusterName": name, **params, **more})
        out.extend(page["Events"])
        token = page.get("NextToken")
        if not token:
            return out
