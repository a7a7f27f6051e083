"""Small builders for DescribeCluster answers and store records used by the engine tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hyperpod_scheduler.cluster.view import ClusterView, parse_cluster

ROLE = "arn:aws:iam::123456789012:role/hyperpod-exec"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def group(
    name: str,
    current: int,
    target: int | None = None,
    *,
    node_type: str = "Compute",
    tier: str = "ami",
    min_count: int | None = None,
    itype: str = "ml.g5.xlarge",
) -> dict[str, Any]:
    g: dict[str, Any] = {
        "InstanceGroupName": name,
        "CurrentCount": current,
        "TargetCount": current if target is None else target,
        "InstanceType": itype,
        "ExecutionRole": ROLE,
        "ThreadsPerCore": 1,
        "Status": "InService",
        "SlurmConfig": {
            "NodeType": node_type,
            **({"PartitionNames": [name]} if node_type == "Compute" else {}),
        },
        "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
    }
    if tier == "ami+extension":
        g["LifeCycleConfig"] = {"SourceS3Uri": "s3://sagemaker-bucket/lc/", "OnInitComplete": "ext.sh"}
    elif tier == "custom":
        g["LifeCycleConfig"] = {"SourceS3Uri": "s3://sagemaker-bucket/lc/", "OnCreate": "on_create.sh"}
    if min_count is not None:
        g["MinCount"] = min_count
    return g


def cluster(*groups: dict[str, Any], status: str = "InService", name: str = "c1", **extra: Any) -> ClusterView:
    return parse_cluster(
        {
            "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefghij12",
            "ClusterName": name,
            "ClusterStatus": status,
            "InstanceGroups": list(groups),
            **extra,
        }
    )
