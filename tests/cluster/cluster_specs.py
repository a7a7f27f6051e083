"""Small spec builders shared by the cluster-spec tests (a plain module: conftest names collide)."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

ROLE = "arn:aws:iam::123456789012:role/hyperpod-execution"
BUCKET = "s3://sagemaker-demo-lifecycle/scripts/"


def slurm_spec(**overrides: Any) -> dict[str, Any]:
    """A valid three-group API-driven Slurm spec as a dict; keyword arguments replace top-level keys."""
    data: dict[str, Any] = {
        "name": "demo",
        "defaults": {"execution_role": ROLE},
        "instance_groups": [
            {
                "name": "controller",
                "instance_type": "ml.m5.xlarge",
                "count": 1,
                "slurm": {"node_type": "Controller"},
            },
            {"name": "login", "instance_type": "ml.m5.xlarge", "count": 1, "slurm": {"node_type": "Login"}},
            {
                "name": "gpu",
                "instance_type": "ml.g5.8xlarge",
                "count": 2,
                "slurm": {"node_type": "Compute", "partition": "gpu"},
            },
        ],
    }
    data.update(overrides)
    return data


def example_text(kind: str) -> str:
    return resources.files("hyperpod_scheduler.cluster").joinpath(f"examples/{kind}.yaml").read_text("utf-8")


def write_spec(directory: Path, content: Any, name: str = "spec.yaml") -> Path:
    """Write a dict (as YAML) or a string (verbatim) to a spec file and return its path."""
    path = directory / name
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content), encoding="utf-8")
    return path


ARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/2hd31rmi9mde"


def describe_answer() -> dict[str, Any]:
    """A DescribeCluster answer shaped as the service returns it (checked against the output model)."""
    return {
        "ClusterArn": ARN,
        "ClusterName": "demo",
        "ClusterStatus": "InService",
        "CreationTime": datetime(2026, 11, 1, tzinfo=UTC),
        "NodeRecovery": "Automatic",
        "Orchestrator": {"Slurm": {}},
        "InstanceGroups": [
            {
                "InstanceGroupName": "controller",
                "InstanceType": "ml.m5.xlarge",
                "CurrentCount": 1,
                "TargetCount": 1,
                "MinCount": 1,
                "ExecutionRole": ROLE,
                "ThreadsPerCore": 1,
                "Status": "InService",
                "SlurmConfig": {"NodeType": "Controller", "PartitionNames": []},
                "CurrentImageId": "ami-0123456789abcdef0",
            },
            {
                "InstanceGroupName": "login",
                "InstanceType": "ml.m5.xlarge",
                "CurrentCount": 1,
                "TargetCount": 1,
                "ExecutionRole": ROLE,
                "ThreadsPerCore": 1,
                "Status": "InService",
                "LifeCycleConfig": {"SourceS3Uri": BUCKET, "OnInitComplete": "extra.sh"},
                "SlurmConfig": {"NodeType": "Login"},
            },
            {
                "InstanceGroupName": "gpu",
                "InstanceType": "ml.g5.8xlarge",
                "CurrentCount": 1,
                "TargetCount": 4,
                "ExecutionRole": ROLE,
                "ThreadsPerCore": 2,
                "Status": "Updating",
                "LifeCycleConfig": {"SourceS3Uri": BUCKET, "OnCreate": "on_create.sh"},
                "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
                "SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["gpu"]},
            },
        ],
    }
