"""`hyperpod-scheduler cluster ...` as a user runs it. AWS calls go to a botocore Stubber, which also
checks every request against the service model; nothing leaves the machine."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from typer.testing import CliRunner

from hyperpod_scheduler.cli import cluster as cluster_cli
from hyperpod_scheduler.cluster.render import render_create_request
from hyperpod_scheduler.cluster.spec import load_spec, spec_from_dict
from hyperpod_scheduler.errors import SpecError, UsageError
from tests.cluster.cluster_specs import ARN, BUCKET, describe_answer, example_text, slurm_spec, write_spec

runner = CliRunner()


def run(*args: str) -> Any:
    # The sub-app alone: the root app only adds the error-to-one-line shell, tested by subprocess below.
    return runner.invoke(cluster_cli.app, list(args))


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
    stubber = Stubber(client)
    monkeypatch.setattr(cluster_cli, "sagemaker_client", lambda **_: client)
    with stubber:
        yield stubber
        stubber.assert_no_pending_responses()


# --- validate ----------------------------------------------------------------------------------------


def test_validate_a_good_spec(tmp_path: Path) -> None:
    result = run("validate", str(write_spec(tmp_path, slurm_spec())))
    assert result.exit_code == 0, result.output
    assert "valid: cluster 'demo', groups controller (ami), login (ami), gpu (ami); 0 error(s)" in result.stdout


def test_validate_lists_every_problem_and_exits_2(tmp_path: Path) -> None:
    data = slurm_spec()
    data["instance_groups"][2].update(count=-1, instance_type="ml.p9.huge")
    result = run("validate", str(write_spec(tmp_path, data)))
    assert result.exit_code == 2
    assert "error: group 'gpu' instance_groups[2].count:" in result.stderr
    assert "error: group 'gpu' instance_groups[2].instance_type: unknown value 'ml.p9.huge'" in result.stderr
    assert "invalid: cluster 'demo'" in result.stdout and "2 error(s)" in result.stdout


def test_validate_json(tmp_path: Path) -> None:
    data = slurm_spec()
    data["instance_groups"][1]["lifecycle"] = {"source_s3_uri": "s3://mine/", "on_init_complete": "e.sh"}
    result = run("validate", "--json", str(write_spec(tmp_path, data)))
    assert result.exit_code == 0
    out = json.loads(result.stdout)
    assert out["ok"] is True
    assert out["tiers"] == {"controller": "ami", "login": "ami+extension", "gpu": "ami"}
    assert out["problems"] == [
        {
            "severity": "warning",
            "field": "instance_groups[1].lifecycle.source_s3_uri",
            "api_field": "InstanceGroups[1].LifeCycleConfig.SourceS3Uri",
            "group": "login",
            "message": out["problems"][0]["message"],
        }
    ]
    assert out["request"] == render_create_request(spec_from_dict(data))


def test_validate_strict_fails_on_warnings(tmp_path: Path) -> None:
    data = slurm_spec()
    data["instance_groups"][1]["lifecycle"] = {"source_s3_uri": "s3://mine/", "on_init_complete": "e.sh"}
    path = str(write_spec(tmp_path, data))
    assert run("validate", path).exit_code == 0
    assert run("validate", "--strict", path).exit_code == 2


def test_validate_unparseable_spec_raises_spec_error(tmp_path: Path) -> None:
    result = run("validate", str(write_spec(tmp_path, "name: [x\n")))
    assert isinstance(result.exception, SpecError)


# --- render ------------------------------------------------------------------------------------------


def test_render_prints_the_request(tmp_path: Path) -> None:
    result = run("render", str(write_spec(tmp_path, slurm_spec())))
    assert result.exit_code == 0
    assert json.loads(result.stdout) == render_create_request(spec_from_dict(slurm_spec()))


def test_render_to_a_file(tmp_path: Path) -> None:
    out = tmp_path / "request.json"
    result = run("render", str(write_spec(tmp_path, slurm_spec())), "-o", str(out))
    assert result.exit_code == 0 and result.stdout == ""
    assert json.loads(out.read_text())["ClusterName"] == "demo"


def test_render_refuses_an_invalid_spec(tmp_path: Path) -> None:
    data = slurm_spec()
    data["instance_groups"][2]["slurm"] = {"node_type": "Compute"}
    result = run("render", str(write_spec(tmp_path, data)))
    assert isinstance(result.exception, SpecError)
    assert "instance_groups[2].slurm.partition" in str(result.exception)
    assert result.stdout == ""


def test_errors_reach_the_user_as_one_line_and_exit_2(tmp_path: Path) -> None:
    # Through the real entry point, the way a shell sees it: no traceback, one line, exit code 2.
    data = slurm_spec()
    data["instance_groups"][2]["slurm"] = {"node_type": "Compute"}
    path = write_spec(tmp_path, data)
    proc = subprocess.run(
        [sys.executable, "-m", "hyperpod_scheduler.cli.main", "cluster", "render", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: {path}: ")
    assert "instance_groups[2].slurm.partition: required on Compute groups" in proc.stderr


# --- create ------------------------------------------------------------------------------------------


def test_create_sends_exactly_the_rendered_request(tmp_path: Path, stub: Stubber) -> None:
    path = write_spec(tmp_path, example_text("slurm"))
    request = render_create_request(load_spec(path))
    stub.add_response("create_cluster", {"ClusterArn": ARN}, expected_params=request)
    result = run("create", str(path))
    assert result.exit_code == 0, result.output
    assert f"creating cluster 'ml-cluster': {ARN}" in result.stdout


def test_create_json(tmp_path: Path, stub: Stubber) -> None:
    path = write_spec(tmp_path, slurm_spec())
    stub.add_response("create_cluster", {"ClusterArn": ARN})
    result = run("create", "--json", str(path))
    assert json.loads(result.stdout) == {"ClusterArn": ARN, "ClusterName": "demo"}


def test_create_dry_run_calls_nothing(tmp_path: Path, stub: Stubber) -> None:
    result = run("create", "--dry-run", str(write_spec(tmp_path, slurm_spec())))
    assert result.exit_code == 0
    assert json.loads(result.stdout)["ClusterName"] == "demo"  # the stubber has no response queued


def test_create_refuses_an_invalid_spec_before_calling_aws(tmp_path: Path, stub: Stubber) -> None:
    data = slurm_spec()
    data["instance_groups"][0]["lifecycle"] = {"source_s3_uri": BUCKET}
    result = run("create", str(write_spec(tmp_path, data)))
    assert isinstance(result.exception, SpecError)


# --- describe ----------------------------------------------------------------------------------------


def test_describe_table(stub: Stubber) -> None:
    stub.add_response("describe_cluster", describe_answer(), expected_params={"ClusterName": "demo"})
    result = run("describe", "demo")
    assert result.exit_code == 0, result.output
    assert "demo: InService" in result.stdout
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[3:] if line.strip()}
    assert rows["controller"] == [
        "controller",
        "ml.m5.xlarge",
        "1",
        "1",
        "1",
        "InService",
        "ami",
        "Controller",
    ]
    assert rows["login"][5:] == ["InService", "ami+extension", "Login"]
    assert rows["gpu"][2:] == ["1", "4", "-", "Updating", "custom", "Compute", "(gpu)"]


def test_describe_as_spec_round_trips(tmp_path: Path, stub: Stubber) -> None:
    stub.add_response("describe_cluster", describe_answer())
    result = run("describe", "demo", "--as-spec")
    assert result.exit_code == 0, result.output
    path = write_spec(tmp_path, result.stdout)
    request = render_create_request(load_spec(path))
    assert [g["InstanceCount"] for g in request["InstanceGroups"]] == [1, 1, 4]
    assert "LifeCycleConfig" not in request["InstanceGroups"][0]
    assert yaml.safe_load(result.stdout)["instance_groups"][2]["ebs_volume_gb"] == 500


def test_describe_json(stub: Stubber) -> None:
    stub.add_response("describe_cluster", describe_answer())
    out = json.loads(run("describe", "demo", "--json").stdout)
    assert out["ClusterArn"] == ARN
    assert out["CreationTime"].startswith("2026-11-01")
    assert "ResponseMetadata" not in out


def test_describe_output_options_are_exclusive() -> None:
    assert isinstance(run("describe", "demo", "--json", "--as-spec").exception, UsageError)


# --- example -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["slurm", "eks"])
def test_example_validates(tmp_path: Path, kind: str) -> None:
    text = run("example", kind).stdout
    result = run("validate", "--strict", str(write_spec(tmp_path, text)))
    assert result.exit_code == 0, result.output


def test_unknown_example() -> None:
    assert isinstance(run("example", "k8s").exception, UsageError)
