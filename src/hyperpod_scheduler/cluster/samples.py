"""Small CreateCluster requests for rehearsals on the emulator, the benchmarks and the tests.

``slurm_request("c1", compute={"gpu": ("ml.g5.12xlarge", 4)})`` is a Slurm cluster with an AMI-based
controller and one compute group per entry (its partition named after the group).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SAMPLE_ROLE = "arn:aws:iam::123456789012:role/hyperpod-sample"


def slurm_request(
    name: str,
    compute: Mapping[str, tuple[str, int]],
    *,
    controller_type: str = "ml.m5.xlarge",
    role: str = SAMPLE_ROLE,
    lifecycle: Mapping[str, Mapping[str, str]] | None = None,
    continuous: bool = False,
) -> dict[str, Any]:
    """``compute`` maps group -> (instance type, count); ``lifecycle`` maps group -> LifeCycleConfig."""
    groups: list[dict[str, Any]] = [
        {
            "InstanceGroupName": "controller",
            "InstanceType": controller_type,
            "InstanceCount": 1,
            "ExecutionRole": role,
            "SlurmConfig": {"NodeType": "Controller"},
        }
    ]
    for group, (itype, count) in compute.items():
        spec: dict[str, Any] = {
            "InstanceGroupName": group,
            "InstanceType": itype,
            "InstanceCount": count,
            "ExecutionRole": role,
            "SlurmConfig": {"NodeType": "Compute", "PartitionNames": [group]},
        }
        if lifecycle and group in lifecycle:
            spec["LifeCycleConfig"] = dict(lifecycle[group])
        groups.append(spec)
    request: dict[str, Any] = {"ClusterName": name, "Orchestrator": {"Slurm": {}}, "InstanceGroups": groups}
    if continuous:
        request["NodeProvisioningMode"] = "Continuous"
    return request
