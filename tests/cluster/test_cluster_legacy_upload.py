"""Legacy topology, raw CreateCluster JSON, and `cluster create --upload-scripts` end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.cluster.create import create_cluster
from hyperpod_scheduler.cluster.legacy import provisioning_parameters
from hyperpod_scheduler.cluster.load import load_report
from hyperpod_scheduler.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SCRIPTS = EXAMPLES / "lifecycle-scripts"
runner = CliRunner()


def test_legacy_topology_sends_no_slurm_config_and_writes_the_file() -> None:
    report = load_report(EXAMPLES / "trn1-legacy-custom.yaml")
    assert report.ok, report.problems
    assert all("SlurmConfig" not in g for g in report.request["InstanceGroups"])
    assert "Orchestrator" not in report.request
    assert provisioning_parameters(report.spec) == {
        "version": "1.0.0",
        "workload_manager": "slurm",
        "controller_group": "controller-machine",
        "login_group": "login-group",
        "worker_groups": [{"instance_group_name": "trn1-workers", "partition_name": "trn1"}],
        "fsx_dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        "fsx_mountname": "abcdefgh",
    }


LEGACY_BASE = """
name: legacy
topology: provisioning-parameters
defaults:
  execution_role: arn:aws:iam::123456789012:role/r
  lifecycle: {source_s3_uri: s3://sagemaker-x/lc/, on_create: on_create.sh}
instance_groups:
"""


@pytest.mark.parametrize(
    ("groups", "needle"),
    [
        (
            "  - {name: a, instance_type: ml.c5.xlarge, count: 1, slurm: {node_type: Compute, partition: p}}\n",
            "exactly one Controller group needed",
        ),
        (
            "  - {name: c, instance_type: ml.c5.xlarge, count: 1, slurm: {node_type: Controller}}\n"
            "  - {name: w, instance_type: ml.c5.xlarge, count: 1, slurm: {node_type: Compute}}\n",
            "group 'w' instance_groups[1].slurm.partition: a worker group needs exactly one partition",
        ),
        (
            "  - {name: c, instance_type: ml.c5.xlarge, count: 1}\n",
            "group 'c' instance_groups[0].slurm: required with topology: provisioning-parameters",
        ),
    ],
)
def test_legacy_topology_problems_name_group_and_field(tmp_path: Path, groups: str, needle: str) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(LEGACY_BASE + groups)
    assert any(needle in p.located() for p in load_report(spec).errors)


def _raw(**group_changes: Any) -> dict[str, Any]:
    request = json.loads((EXAMPLES / "raw" / "create-cluster.json").read_text())
    request["InstanceGroups"][0].update(group_changes)
    return request


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        (
            {"LifeCycleConfig": {}},
            "group 'controller-machine' InstanceGroups[0].LifeCycleConfig: the LifeCycleConfig block is empty",
        ),
        (
            {"LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-x/", "OnCreate": "a.sh", "OnInitComplete": "b.sh"}},
            "InstanceGroups[0].LifeCycleConfig.OnCreate: OnCreate and OnInitComplete are mutually exclusive",
        ),
        ({"InstanceType": "ml.p99.huge"}, "InstanceGroups[0].InstanceType: unknown value 'ml.p99.huge'"),
    ],
)
def test_raw_request_rules(tmp_path: Path, changes: dict[str, Any], needle: str) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(_raw(**changes)))
    result = runner.invoke(app, ["cluster", "validate", str(path)])
    assert result.exit_code == 2
    assert needle in result.output


def test_raw_example_is_accepted_as_is() -> None:
    result = runner.invoke(app, ["cluster", "render", str(EXAMPLES / "raw" / "create-cluster.json")])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == json.loads((EXAMPLES / "raw" / "create-cluster.json").read_text())


def test_render_writes_provisioning_parameters(tmp_path: Path) -> None:
    out = tmp_path / "pp.json"
    result = runner.invoke(
        app, ["cluster", "render", str(EXAMPLES / "trn1-legacy-custom.yaml"), "--provisioning-parameters", str(out)]
    )
    assert result.exit_code == 0
    assert json.loads(out.read_text())["controller_group"] == "controller-machine"
    api = runner.invoke(
        app, ["cluster", "render", str(EXAMPLES / "p5-continuous-ami.yaml"), "--provisioning-parameters", str(out)]
    )
    # CliRunner skips the console script's error wrapper, so the project's error arrives as the exception
    assert isinstance(api.exception, SpecError) and "topology" in str(api.exception)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)


@mock_aws
def test_create_uploads_scripts_then_sends_the_validated_request(aws_env: None) -> None:
    report = load_report(EXAMPLES / "trn1-legacy-custom.yaml")
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="sagemaker-trn1-research-lifecycle")
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    arn = "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefghij12"
    with Stubber(sagemaker) as stub:  # the Stubber validates the request against the real API model
        stub.add_response("create_cluster", {"ClusterArn": arn}, expected_params=report.request)
        assert create_cluster(report, sagemaker, s3=s3, scripts=SCRIPTS) == arn
        stub.assert_no_pending_responses()
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="sagemaker-trn1-research-lifecycle")["Contents"]}
    assert {"scripts/on_create.sh", "scripts/provisioning_parameters.json"} <= keys
    body = s3.get_object(Bucket="sagemaker-trn1-research-lifecycle", Key="scripts/provisioning_parameters.json")
    assert json.loads(body["Body"].read())["worker_groups"][0]["partition_name"] == "trn1"


@mock_aws
def test_missing_entry_point_fails_before_anything_is_uploaded(aws_env: None, tmp_path: Path) -> None:
    (tmp_path / "something_else.sh").write_text("#!/bin/bash\n")
    report = load_report(EXAMPLES / "trn1-legacy-custom.yaml")
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="sagemaker-trn1-research-lifecycle")
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    with Stubber(sagemaker) as stub, pytest.raises(SpecError, match=r"'on_create\.sh' is not in"):
        create_cluster(report, sagemaker, s3=s3, scripts=tmp_path)
    stub.assert_no_pending_responses()
    assert "Contents" not in s3.list_objects_v2(Bucket="sagemaker-trn1-research-lifecycle")
