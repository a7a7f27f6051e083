"""`deploy template|package` and `config push|pull` through Typer, as the lead will register them."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import typer
import yaml
from typer.testing import CliRunner

from hyperpod_scheduler.cli.deploy import app as deploy_app
from hyperpod_scheduler.cli.deploy import config_app
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.store.dynamodb import create_table
from tests.deploy.conftest import fleet_yaml
from tests.store.dynamodb_mock import REGION, mocked_aws

root = typer.Typer()
root.add_typer(deploy_app, name="deploy")
root.add_typer(config_app, name="config")
runner = CliRunner()


@pytest.fixture
def table() -> Iterator[str]:
    with mocked_aws():
        create_table(boto3.client("dynamodb", region_name=REGION), "hps")
        boto3.client("s3", region_name=REGION).create_bucket(Bucket="fleet-bucket")
        yield "hps"


def test_template_prints_the_hub_with_parameters_filled_in() -> None:
    result = runner.invoke(root, ["deploy", "template", "hub", "-p", "CodeBucket=artefacts"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.output)["Parameters"]["CodeBucket"]["Default"] == "artefacts"


def test_template_writes_a_file(tmp_path: Path) -> None:
    out = tmp_path / "spoke.yaml"
    hub = "arn:aws:iam::111111111111:role/hps-hub-WorkerRole"
    result = runner.invoke(root, ["deploy", "template", "spoke", "-o", str(out), "-p", f"HubWorkerRoleArn={hub}"])
    assert result.exit_code == 0 and "wrote" in result.output
    assert yaml.safe_load(out.read_text())["Parameters"]["HubWorkerRoleArn"]["Default"] == hub
    bad = runner.invoke(root, ["deploy", "template", "spoke", "-p", "HubWorkerRoleArn=x"])
    assert "HubWorkerRoleArn='x' does not match" in str(bad.exception)


def test_template_refuses_a_malformed_param() -> None:
    result = runner.invoke(root, ["deploy", "template", "hub", "-p", "CodeBucket"])
    assert isinstance(result.exception, HyperpodSchedulerError)
    assert "is not Key=Value" in str(result.exception)


def test_package_without_dependencies_names_the_zip_by_its_hash_and_says_where_it_goes(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    result = runner.invoke(root, ["deploy", "package", "--no-deps", "-o", str(out), "--python-version", here, "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    path = Path(answer["path"])
    assert path.parent == out and path.name == f"lambda-{answer['sha256'][:16]}.zip"
    assert answer["key"] == f"hyperpod-scheduler/{path.name}"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == answer["sha256"]
    told = runner.invoke(root, ["deploy", "package", "--no-deps", "-o", str(out), "--python-version", here])
    assert f"deploy: CodeKey={answer['key']}" in told.output  # the same bytes, the same key


def test_package_refuses_bytecode_for_another_python(tmp_path: Path) -> None:
    other = "3.12" if sys.version_info[:2] != (3, 12) else "3.13"
    result = runner.invoke(root, ["deploy", "package", "--no-deps", "-o", str(tmp_path), "--python-version", other])
    assert isinstance(result.exception, HyperpodSchedulerError)
    assert f"bytecode for Python {other} needs Python {other}" in str(result.exception)


@pytest.mark.parametrize("where", ["dynamodb://hps", "s3://fleet-bucket/config/fleet.yaml"])
def test_config_push_then_pull_gives_back_the_file(table: str, where: str, tmp_path: Path) -> None:
    source = tmp_path / "fleet.yaml"
    source.write_text("# our fleet\n" + fleet_yaml())
    pushed = runner.invoke(root, ["config", "push", str(source), "--location", where])
    assert pushed.exit_code == 0, pushed.output
    assert "6 target(s) in 3 account(s)" in pushed.output
    pulled = runner.invoke(root, ["config", "pull", "--location", where])
    assert pulled.exit_code == 0
    assert pulled.output == source.read_text()


def test_an_invalid_config_is_refused_and_nothing_is_stored(table: str, tmp_path: Path) -> None:
    source = tmp_path / "fleet.yaml"
    source.write_text("targets:\n  - account: '12345'\n    region: us-east-1\n")
    pushed = runner.invoke(root, ["config", "push", str(source), "--location", "dynamodb://hps"])
    assert isinstance(pushed.exception, HyperpodSchedulerError)
    assert "targets[0].account" in str(pushed.exception) and "'12345'" in str(pushed.exception)
    pulled = runner.invoke(root, ["config", "pull", "--location", "dynamodb://hps"])
    assert "nothing stored yet" in str(pulled.exception)


def test_config_needs_a_location(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HYPERPOD_SCHEDULER_FLEET_CONFIG", raising=False)
    result = runner.invoke(root, ["config", "pull"])
    assert "--location" in str(result.exception)
    bad = runner.invoke(root, ["config", "pull", "--location", "ftp://x/y"])
    assert "use dynamodb://TABLE" in str(bad.exception)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("schedule: office", "schedule: ofice"), "defaults.schedule: "),
        (("clusters: [train]", "clusters: [train]\n    policy: {groups: {train: keep}}\n    profile: prod"), "profile"),
    ],
)
def test_push_refuses_what_the_fleet_cannot_honour_and_keeps_what_was_there(
    table: str, tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(fleet_yaml())
    bad.write_text(fleet_yaml().replace(*change, 1))
    assert runner.invoke(root, ["config", "push", str(good), "--location", "dynamodb://hps"]).exit_code == 0
    pushed = runner.invoke(root, ["config", "push", str(bad), "--location", "dynamodb://hps"])
    assert isinstance(pushed.exception, HyperpodSchedulerError) and message in str(pushed.exception)
    assert "\n" not in str(pushed.exception)
    pulled = runner.invoke(root, ["config", "pull", "--location", "dynamodb://hps"])
    assert pulled.output == good.read_text()  # the workers keep running the last good config


def test_template_written_to_a_file_says_how_to_pass_its_parameters_explicitly(tmp_path: Path) -> None:
    out = tmp_path / "hub.yaml"
    key = "hyperpod-scheduler/lambda-0123456789abcdef.zip"
    args = ["deploy", "template", "hub", "-o", str(out), "-p", "CodeBucket=artefacts", "-p", f"CodeKey={key}"]
    result = runner.invoke(root, [*args, "-p", "TickMinutes=5"])
    assert result.exit_code == 0, result.output
    assert "deploy with: --parameter-overrides CodeBucket=artefacts TickMinutes=5" in result.output
    assert key in out.read_text() and "CodeKey" not in yaml.safe_load(out.read_text())["Parameters"]


def _zip(path: Path, text: str) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        z.writestr("handler.py", text)
    return path


def test_verify_names_each_function_that_does_not_run_the_artefact(tmp_path: Path) -> None:
    old, new = _zip(tmp_path / "lambda-old.zip", "v = 1"), _zip(tmp_path / "lambda-new.zip", "v = 2")
    with mocked_aws():
        role = boto3.client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        lam = boto3.client("lambda", region_name=REGION)
        for suffix in ("orchestrator", "worker"):
            lam.create_function(FunctionName=f"hps-hub-{suffix}", Runtime="python3.12", Role=role,
                                Handler="handler.h", Code={"ZipFile": old.read_bytes()})  # fmt: skip
        args = ["deploy", "verify", str(new), "--stack-name", "hps-hub", "--region", REGION]
        stale = runner.invoke(root, args)
        assert isinstance(stale.exception, HyperpodSchedulerError)
        message = str(stale.exception)
        assert "hps-hub-orchestrator runs" in message and "hps-hub-worker runs" in message and "\n" not in message
        lam.update_function_code(FunctionName="hps-hub-orchestrator", ZipFile=new.read_bytes())
        half = runner.invoke(root, args)
        assert "hps-hub-worker runs" in str(half.exception) and "orchestrator" not in str(half.exception)
        lam.update_function_code(FunctionName="hps-hub-worker", ZipFile=new.read_bytes())
        done = runner.invoke(root, args)
        assert done.exit_code == 0, done.output
        assert "hps-hub-worker: runs lambda-new.zip" in done.output


def test_config_status_says_when_the_pause_switch_is_on(table: str, tmp_path: Path) -> None:
    source = tmp_path / "fleet.yaml"
    source.write_text(fleet_yaml())
    assert runner.invoke(root, ["config", "push", str(source), "--location", "dynamodb://hps"]).exit_code == 0
    active = runner.invoke(root, ["config", "status", "--location", "dynamodb://hps"])
    assert "version 1, 6 target(s) in 3 account(s)" in active.output and "scheduling: active" in active.output
    source.write_text(fleet_yaml() + "hub: {paused: true}\n")
    pushed = runner.invoke(root, ["config", "push", str(source), "--location", "dynamodb://hps"])
    assert "scheduling paused: hub.paused is true" in pushed.output
    paused = runner.invoke(root, ["config", "status", "--location", "dynamodb://hps"])
    assert "version 2" in paused.output and "scheduling paused: hub.paused is true" in paused.output


def test_config_status_says_what_the_orchestrator_recorded_of_the_stacks_scheduling_active(
    table: str, tmp_path: Path
) -> None:
    from datetime import UTC, datetime

    from hyperpod_scheduler.deploy import pause_record

    source = tmp_path / "fleet.yaml"
    source.write_text(fleet_yaml())
    assert runner.invoke(root, ["config", "push", str(source), "--location", "dynamodb://hps"]).exit_code == 0
    before = runner.invoke(root, ["config", "status", "--location", "dynamodb://hps"])
    assert "scheduling: active (the orchestrator has recorded no SchedulingActive=No)" in before.output
    ddb = boto3.client("dynamodb", region_name=REGION)
    pause_record.record(ddb, "hps", (pause_record.STACK,), datetime(2026, 12, 1, 19, 0, tzinfo=UTC))
    paused = runner.invoke(root, ["config", "status", "--location", "dynamodb://hps"])
    assert (
        "scheduling paused: the stack parameter SchedulingActive=No (as the orchestrator recorded it since "
        "2026-12-01 19:00Z)" in paused.output
    )


def test_push_refuses_a_topic_the_workers_may_not_publish_to(table: str, tmp_path: Path) -> None:
    template = {
        "Resources": {"AlarmTopic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {"AlarmTopicArn": {"Value": {"Ref": "AlarmTopic"}}},
    }
    cfn = boto3.client("cloudformation", region_name=REGION)
    cfn.create_stack(StackName="hps-hub", TemplateBody=json.dumps(template))
    (hub,) = [o["OutputValue"] for o in cfn.describe_stacks(StackName="hps-hub")["Stacks"][0]["Outputs"]]
    source = tmp_path / "fleet.yaml"
    args = ["config", "push", str(source), "--location", "dynamodb://hps", "--hub-stack", "hps-hub", "--region", REGION]
    other = "arn:aws:sns:us-east-1:123456789012:somewhere-else"
    source.write_text(fleet_yaml() + f"notifications: {{sns_topic_arn: '{other}'}}\n")
    refused = runner.invoke(root, args)
    assert isinstance(refused.exception, HyperpodSchedulerError)
    assert f"notifications.sns_topic_arn: '{other}' is not the hub's alarm topic {hub}" in str(refused.exception)
    assert "nothing stored yet" in str(
        runner.invoke(root, ["config", "pull", "--location", "dynamodb://hps"]).exception
    )
    source.write_text(fleet_yaml() + f"notifications: {{sns_topic_arn: '{hub}'}}\n")
    assert runner.invoke(root, args).exit_code == 0
    missing = runner.invoke(root, [*args[:-4], "--hub-stack", "no-such-stack", "--region", REGION])
    assert "--hub-stack no-such-stack: cannot read" in str(missing.exception)
