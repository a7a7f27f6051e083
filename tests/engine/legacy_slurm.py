"""A Slurm cluster as the aws-samples lifecycle scripts build it: no SlurmConfig, the roles named in
provisioning_parameters.json beside the scripts (shared by the Slurm-role tests of the engine, the
agent and the dashboard)."""

from __future__ import annotations

from typing import Any

from tests.engine.conftest import ROLE

BUCKET = "sagemaker-lifecycle-legacy"
SOURCE = f"s3://{BUCKET}/src/"
# The aws-samples lifecycle scripts' file (1.architectures/5.sagemaker-hyperpod/LifecycleScripts/base-config).
PARAMETERS = {
    "version": "1.0.0",
    "workload_manager": "slurm",
    "controller_group": "controller-machine",
    "login_group": "login-group",
    "worker_groups": [{"instance_group_name": "worker-group-1", "partition_name": "ml.p5.48xlarge"}],
}


def legacy_group(name: str, itype: str, count: int) -> dict[str, Any]:
    """One instance group of that cluster: its lifecycle scripts at SOURCE, no SlurmConfig."""
    return {
        "InstanceGroupName": name,
        "InstanceType": itype,
        "InstanceCount": count,
        "ExecutionRole": ROLE,
        "ThreadsPerCore": 1,
        "LifeCycleConfig": {"SourceS3Uri": SOURCE, "OnCreate": "on_create.sh"},
    }
