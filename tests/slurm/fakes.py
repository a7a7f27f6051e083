"""A manual clock, jobs, nodes, intents and cluster views for the agent tests that need no real Slurm."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hyperpod_scheduler.agent.messages import Intent, NodeSelector
from hyperpod_scheduler.agent.settings import CheckpointSettings
from hyperpod_scheduler.cluster.view import ClusterView, parse_cluster
from hyperpod_scheduler.slurm.model import SlurmJob, SlurmNode

T0 = datetime(2026, 11, 30, 19, 0, tzinfo=UTC)


@dataclass
class Clock:
    at: datetime = T0

    def now(self) -> datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.at += timedelta(seconds=max(seconds, 0.001))


def node(name: str, partitions: Sequence[str], state: str = "idle", reason: str = "", flags: str = "") -> SlurmNode:
    return SlurmNode(name=name, state=state, flags=flags, reason=reason, partitions=tuple(partitions))


def job(job_id: str, name: str, nodes: Sequence[str], comment: str = "", state: str = "RUNNING") -> SlurmJob:
    return SlurmJob(job_id, name, state, "alice", "gpu", tuple(nodes), comment)


def stop_intent(settings: CheckpointSettings, groups: dict[str, NodeSelector] | None = None, **extra: Any) -> Intent:
    return Intent(
        id=extra.pop("id", "i-1"),
        cluster=extra.pop("cluster", "default/us-east-1/c1"),
        action="stop",
        groups=groups if groups is not None else {"gpu": NodeSelector(partition="gpu")},
        settings=settings,
        posted_at=extra.pop("posted_at", T0),
        expires_at=extra.pop("expires_at", T0 + timedelta(hours=1)),
        **extra,
    )


def view(*groups: tuple[str, str, str | None]) -> ClusterView:
    """(name, node type, partition) per group."""
    return parse_cluster(
        {
            "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefghij12",
            "ClusterName": "c1",
            "ClusterStatus": "InService",
            "InstanceGroups": [
                {
                    "InstanceGroupName": name,
                    "CurrentCount": 2,
                    "TargetCount": 2,
                    "InstanceType": "ml.p5.48xlarge",
                    "Status": "InService",
                    "SlurmConfig": {"NodeType": kind, **({"PartitionNames": [part]} if part else {})},
                }
                for name, kind, part in groups
            ],
        }
    )
