"""The hub and spoke templates: cfn-lint clean, least privilege, parameters fillable."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cfnlint.api import ManualArgs, lint_file

from hyperpod_scheduler.deploy.templates import TEMPLATES, load_template, render
from hyperpod_scheduler.errors import UsageError

MUTATING = {"sagemaker:updatecluster", "sagemaker:batchaddclusternodes", "sagemaker:batchdeleteclusternodes"}
TAG_KEY = "aws:ResourceTag/hyperpod-scheduler:schedule"


def statements(template: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every IAM statement of every role's inline policies (Fn::If branches included)."""
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        for policy in resource["Properties"].get("Policies", []):
            for statement in policy["PolicyDocument"]["Statement"]:
                if "Fn::If" in statement:
                    yield from (s for s in statement["Fn::If"][1:] if "Effect" in s)
                else:
                    yield statement


def actions(statement: dict[str, Any]) -> list[str]:
    found = statement["Action"]
    return [a.lower() for a in ([found] if isinstance(found, str) else found)]


@pytest.mark.parametrize("name", TEMPLATES)
def test_cfn_lint_passes(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(render(name), encoding="utf-8")
    assert lint_file(path, config=ManualArgs(regions=["us-east-1", "eu-west-1"])) == []


@pytest.mark.parametrize("name", TEMPLATES)
def test_no_wildcard_actions_and_no_admin(name: str) -> None:
    template = load_template(name)
    for statement in statements(template):
        for action in actions(statement):
            assert not action.endswith(":*") and action != "*", (name, action)
        assert statement["Effect"] == "Allow"
    text = render(name)
    assert "AdministratorAccess" not in text and "ManagedPolicyArns" not in text


def test_spoke_resizes_only_clusters_that_carry_the_schedule_tag() -> None:
    found = set()
    for statement in statements(load_template("spoke")):
        mutating = MUTATING & set(actions(statement))
        if not mutating:
            continue
        found |= mutating
        assert statement["Condition"] == {"Null": {TAG_KEY: "false"}}
        assert set(actions(statement)) <= MUTATING  # nothing else shares the tag-guarded statement
    assert found == MUTATING


def test_spoke_allows_reads_and_passes_roles_only_to_sagemaker() -> None:
    by_sid = {s["Sid"]: s for s in statements(load_template("spoke"))}
    assert {a.split(":")[1] for a in actions(by_sid["ReadClusters"])} <= {
        "describecluster", "listclusternodes", "describeclusternode", "listtags"
    }  # fmt: skip
    assert by_sid["PassExistingExecutionRoles"]["Condition"] == {
        "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}
    }
    assert not any(a.startswith("sagemaker:") and a.split(":")[1] in MUTATING for a in actions(by_sid["ListClusters"]))


def test_hub_keeps_history_with_a_ttl_and_logs_for_a_bounded_time() -> None:
    hub = load_template("hub")
    resources = hub["Resources"]
    assert resources["StateTable"]["Properties"]["TimeToLiveSpecification"] == {
        "AttributeName": "expires_at",
        "Enabled": True,
    }
    groups = [r for r in resources.values() if r["Type"] == "AWS::Logs::LogGroup"]
    assert len(groups) == 2 and all("RetentionInDays" in g["Properties"] for g in groups)
    assert resources["WorkQueue"]["Properties"]["RedrivePolicy"]["maxReceiveCount"] == 3
    alarm_targets = [
        r["Properties"]["AlarmActions"] for r in resources.values() if r["Type"] == "AWS::CloudWatch::Alarm"
    ]
    assert len(alarm_targets) == 3 and all(a == [{"Ref": "AlarmTopic"}] for a in alarm_targets)


def test_parameters_are_filled_in_as_defaults() -> None:
    text = render("hub", {"CodeBucket": "my-artefacts", "ScheduleRate": "rate(10 minutes)", "LogRetentionDays": "90"})
    params = yaml.safe_load(text)["Parameters"]
    assert params["CodeBucket"]["Default"] == "my-artefacts"
    assert params["ScheduleRate"]["Default"] == "rate(10 minutes)"
    assert params["LogRetentionDays"]["Default"] == 90


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("hub", {"Bucket": "x"}, "no parameter 'Bucket'"),
        ("hub", {"LogRetentionDays": "8"}, "LogRetentionDays='8' is not one of"),
        ("middle", {}, "template 'middle': unknown"),
    ],
)
def test_bad_template_requests_are_one_line_errors(name: str, params: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message) as err:
        render(name, params)
    assert "\n" not in str(err.value)


def test_a_worker_may_run_as_long_as_the_fleet_config_is_checked_against() -> None:
    from hyperpod_scheduler.deploy.credentials import SESSION_SECONDS
    from hyperpod_scheduler.deploy.fleet_config import DEFAULT_WORKER_TIMEOUT_S

    hub = load_template("hub")
    timeout = hub["Parameters"]["WorkerTimeout"]
    assert hub["Resources"]["WorkerFunction"]["Properties"]["Timeout"] == {"Ref": "WorkerTimeout"}
    assert timeout["Default"] == DEFAULT_WORKER_TIMEOUT_S  # hub.worker_timeout_seconds' default
    # SQS must not hand a message to a second worker while the first may still run, and the assumed
    # spoke credentials must outlive the longest run.
    assert hub["Resources"]["WorkQueue"]["Properties"]["VisibilityTimeout"] >= 6 * timeout["MaxValue"]
    assert timeout["MaxValue"] < SESSION_SECONDS


def test_the_worker_may_notify_only_the_hubs_topic() -> None:
    by_sid = {s["Sid"]: s for s in statements(load_template("hub")) if "Sid" in s}
    assert actions(by_sid["NotifyTheAlarmTopic"]) == ["sns:publish"]
    assert by_sid["NotifyTheAlarmTopic"]["Resource"] == {"Ref": "AlarmTopic"}


def test_the_spoke_reaches_only_its_checkpoint_channel_bucket_and_only_when_asked() -> None:
    spoke = load_template("spoke")
    by_sid = {s["Sid"]: s for s in statements(spoke) if "Sid" in s}
    assert set(actions(by_sid["CheckpointChannelMessages"])) == {"s3:getobject", "s3:putobject"}
    assert "${CheckpointChannelBucket}/*" in by_sid["CheckpointChannelMessages"]["Resource"]["Fn::Sub"]
    assert actions(by_sid["CheckpointChannelMissingIsNotDenied"]) == ["s3:listbucket"]
    guarded = [
        s["Fn::If"][0] for p in spoke["Resources"]["SpokeRole"]["Properties"]["Policies"]
        for s in p["PolicyDocument"]["Statement"] if "Fn::If" in s
    ]  # fmt: skip
    assert guarded == ["HasCheckpointChannel", "HasCheckpointChannel"]  # no bucket given: no S3 at all
