"""The hub and spoke templates: cfn-lint (informational checks too) and checkov clean, least privilege
judged by evaluating the policies, alarms that can reach a person, and the docs' examples allowed."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest
import yaml
from botocore import xform_name

from hyperpod_scheduler.deploy import observe
from hyperpod_scheduler.deploy.fleet_config import parse_fleet_yaml
from hyperpod_scheduler.deploy.handlers import DEFAULT_MAX_RECEIVES, RECEIVES_ENV
from hyperpod_scheduler.deploy.markers import DEFAULT_QUEUED_S
from hyperpod_scheduler.deploy.templates import TEMPLATES, load_template, overrides, render
from hyperpod_scheduler.errors import UsageError
from tests.deploy.iam import Template, allowed, code_blocks, trusts

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "deploy.md"
CHECKOV = Path(os.environ.get("HYPERPOD_SCHEDULER_CHECKOV_VENV", ROOT / ".venv-checkov")) / "bin" / "checkov"
TAG_KEY = "aws:ResourceTag/hyperpod-scheduler:schedule"
CLUSTER = "arn:aws:sagemaker:eu-west-1:999999999999:cluster/abcd1234efgh"
HUB_PARAMS = {"CodeBucket": "artefacts", "CodeKey": "hyperpod-scheduler/lambda-0123456789abcdef.zip"}
SPOKE_PARAMS = {"HubWorkerRoleArn": "arn:aws:iam::111111111111:role/hps-hub-WorkerRole", "ExecutionRoleNames": "x"}


def statements(template: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every IAM statement of every role's inline policies (both Fn::If branches)."""
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


# ---- linters -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "params"), [("hub", {}), ("spoke", {}), ("hub", HUB_PARAMS)])
def test_cfn_lint_passes_with_informational_checks(name: str, params: dict[str, str], tmp_path: Path) -> None:
    # Imported here, not at the top: cfn-lint brings sympy, seconds of CPU for every xdist worker that
    # collects this module, and only these three tests use it.
    from cfnlint.api import ManualArgs, lint_file

    path = tmp_path / f"{name}.yaml"
    path.write_text(render(name, params), encoding="utf-8")
    found = lint_file(path, config=ManualArgs(regions=["us-east-1", "eu-west-1"], include_checks=["I"]))
    assert [f"{m.rule.id} {m.message} (line {m.linenumber})" for m in found] == []


@pytest.mark.parametrize("name", TEMPLATES)
def test_checkov_passes_or_each_finding_is_skipped_in_the_template_with_its_reason(name: str, tmp_path: Path) -> None:
    if not CHECKOV.exists():
        message = f"{CHECKOV} is missing: run scripts/checkov-ci.sh (the test command does)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    path = tmp_path / f"{name}.yaml"
    path.write_text(render(name), encoding="utf-8")
    done = subprocess.run(
        [str(CHECKOV), "-f", str(path), "--framework", "cloudformation", "-o", "json", "--quiet", "--compact"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"},
    )
    report = json.loads(done.stdout or "{}")
    report = report[0] if isinstance(report, list) else report
    failed = report.get("results", {}).get("failed_checks", []) if report else []
    assert [f"{c['check_id']} {c['check_name']} ({c['resource']})" for c in failed] == []
    for skipped in report.get("results", {}).get("skipped_checks", []) if report else []:
        assert len(skipped.get("suppress_comment", "")) > 20, skipped["check_id"]  # a reason, not a shrug


# ---- least privilege -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", TEMPLATES)
def test_no_wildcard_actions_and_no_admin(name: str) -> None:
    for statement in statements(load_template(name)):
        for action in actions(statement):
            assert not action.endswith(":*") and action != "*", (name, action)
        assert statement["Effect"] == "Allow"
    text = render(name)
    assert "AdministratorAccess" not in text and "ManagedPolicyArns" not in text


def _sagemaker_calls_of_the_worker() -> set[str]:
    """Every SageMaker operation the worker's code can call (attribute calls and paginators, by the
    botocore model's names) in the modules a worker run imports."""
    probe = (
        "import sys, hyperpod_scheduler.deploy.handlers; "
        "print('\\n'.join(m.__file__ for n, m in sys.modules.items() "
        "if n.startswith('hyperpod_scheduler') and getattr(m, '__file__', None)))"
    )
    files = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    ops = {xform_name(o): o for o in botocore.session.get_session().get_service_model("sagemaker").operation_names}
    found: set[str] = set()
    for file in files:
        for node in ast.walk(ast.parse(Path(file).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name = node.func.attr
                if name == "get_paginator" and node.args and isinstance(node.args[0], ast.Constant):
                    name = str(node.args[0].value)
                if name in ops:
                    found.add(ops[name])
    return found - {"Search"}  # re.search / pattern.search in aws/model.py: the scheduler never calls Search


def test_the_spoke_grants_exactly_the_sagemaker_calls_the_worker_makes() -> None:
    granted = {
        a.split(":", 1)[1]
        for s in statements(load_template("spoke"))
        for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
        if a.startswith("sagemaker:")
    }
    assert granted == _sagemaker_calls_of_the_worker()
    assert "BatchAddClusterNodes" not in granted and "BatchDeleteClusterNodes" not in granted


def test_the_spoke_resizes_only_tagged_clusters_and_passes_only_the_named_roles_to_sagemaker() -> None:
    t = Template(load_template("spoke"), {**SPOKE_PARAMS, "ExecutionRoleNames": "HyperPodExec-*,train-role"})
    policy = t.role_statements("SpokeRole")
    tagged = {TAG_KEY: "office"}
    assert allowed(policy, "sagemaker:UpdateCluster", CLUSTER, tagged)
    assert not allowed(policy, "sagemaker:UpdateCluster", CLUSTER)  # untagged: never resized
    assert allowed(policy, "sagemaker:DescribeCluster", CLUSTER)
    assert not allowed(policy, "sagemaker:DeleteCluster", CLUSTER, tagged)
    to_sagemaker = {"iam:PassedToService": "sagemaker.amazonaws.com"}
    for role in ("HyperPodExec-gpu", "train-role"):
        assert allowed(policy, "iam:PassRole", f"arn:aws:iam::999999999999:role/{role}", to_sagemaker)
    assert not allowed(policy, "iam:PassRole", "arn:aws:iam::999999999999:role/admin", to_sagemaker)
    assert not allowed(
        policy,
        "iam:PassRole",
        "arn:aws:iam::999999999999:role/train-role",
        {"iam:PassedToService": "ec2.amazonaws.com"},
    )
    spec = load_template("spoke")["Parameters"]["ExecutionRoleNames"]
    assert "Default" not in spec  # no "every role in the account" by default


def test_the_spoke_trusts_only_the_hubs_worker_and_with_an_org_id_only_inside_the_organisation() -> None:
    hub = SPOKE_PARAMS["HubWorkerRoleArn"]
    plain = Template(load_template("spoke"), SPOKE_PARAMS).trust_statements("SpokeRole")
    assert trusts(plain, hub) and not trusts(plain, "arn:aws:iam::222222222222:role/other")
    org = Template(load_template("spoke"), {**SPOKE_PARAMS, "OrganizationId": "o-abcdefghij"})
    scoped = org.trust_statements("SpokeRole")
    assert trusts(scoped, hub, {"aws:PrincipalOrgID": "o-abcdefghij"})
    assert not trusts(scoped, hub, {"aws:PrincipalOrgID": "o-zzzzzzzzzz"}) and not trusts(scoped, hub)


def test_the_hub_assumes_only_the_named_spoke_roles_and_with_an_org_id_only_in_the_organisation() -> None:
    params = {**HUB_PARAMS, "SpokeRoleNames": "hyperpod-scheduler-spoke,custom-spoke"}
    policy = Template(load_template("hub"), params).role_statements("WorkerRole")
    for role in ("hyperpod-scheduler-spoke", "custom-spoke"):
        assert allowed(policy, "sts:AssumeRole", f"arn:aws:iam::333333333333:role/{role}")
    assert not allowed(policy, "sts:AssumeRole", "arn:aws:iam::333333333333:role/OrganizationAccountAccessRole")
    org = Template(load_template("hub"), {**params, "OrganizationId": "o-abcdefghij"}).role_statements("WorkerRole")
    role = "arn:aws:iam::333333333333:role/custom-spoke"
    assert allowed(org, "sts:AssumeRole", role, {"aws:ResourceOrgID": "o-abcdefghij"})
    assert not allowed(org, "sts:AssumeRole", role, {"aws:ResourceOrgID": "o-zzzzzzzzzz"})


def test_the_orchestrator_writes_only_queue_markers_and_its_pause_record_and_reads_only_the_config() -> None:
    policy = Template(load_template("hub"), HUB_PARAMS).role_statements("OrchestratorRole")
    table = "arn:aws:stand-in:::StateTable/Arn"
    for action in ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchGetItem"):
        assert allowed(policy, action, table, {"dynamodb:LeadingKeys": "queue#111111111111/us-east-1/0of1"})
        assert not allowed(policy, action, table, {"dynamodb:LeadingKeys": "rec#111111111111/us-east-1/c"})
    assert allowed(policy, "dynamodb:GetItem", table, {"dynamodb:LeadingKeys": "config"})
    assert not allowed(policy, "dynamodb:GetItem", table, {"dynamodb:LeadingKeys": "rec#a/b/c"})
    assert not allowed(policy, "dynamodb:Scan", table)
    # The effective pause, for the faces that read only the table; never the fleet config itself.
    for action in ("dynamodb:GetItem", "dynamodb:PutItem"):
        assert allowed(policy, action, table, {"dynamodb:LeadingKeys": "pause"})
    for action in ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"):
        assert not allowed(policy, action, table, {"dynamodb:LeadingKeys": "config"})
    # Whether a queued message still waits on the queue (else its part is queued afresh).
    queue = "arn:aws:stand-in:::WorkQueue/Arn"
    assert allowed(policy, "sqs:SendMessage", queue) and allowed(policy, "sqs:GetQueueAttributes", queue)


# ---- failures reach a person ---------------------------------------------------------------------


def test_cloudwatch_may_publish_to_the_alarm_topic_through_its_key() -> None:
    resources = load_template("hub")["Resources"]
    topic = resources["AlarmTopic"]["Properties"]
    assert topic["KmsMasterKeyId"] == {"Ref": "AlarmKey"}  # not alias/aws/sns, which CloudWatch cannot use
    key = resources["AlarmKey"]["Properties"]
    assert key["EnableKeyRotation"] is True
    by_sid = {s["Sid"]: s for s in key["KeyPolicy"]["Statement"]}
    cw = by_sid["CloudWatchAlarmsPublish"]
    assert cw["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert set(cw["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    # Only this account's alarms (the confused deputy), and no grant nothing uses (the DLQ is SQS-managed).
    policy = Template(load_template("hub"), HUB_PARAMS).resolve(key["KeyPolicy"])["Statement"]
    own = {"aws:SourceAccount": "999999999999", "aws:SourceArn": "arn:aws:cloudwatch:eu-west-1:999999999999:alarm:x"}
    (cw_resolved,) = [s for s in policy if s["Sid"] == "CloudWatchAlarmsPublish"]
    assert allowed([cw_resolved], "kms:GenerateDataKey", "*", own)
    assert not allowed([cw_resolved], "kms:GenerateDataKey", "*", {**own, "aws:SourceAccount": "888888888888"})
    other = {**own, "aws:SourceArn": "arn:aws:cloudwatch:eu-west-1:888888888888:alarm:x"}
    assert not allowed([cw_resolved], "kms:GenerateDataKey", "*", other)
    assert set(by_sid) == {"AccountAdministersTheKey", "CloudWatchAlarmsPublish"}
    worker = Template(load_template("hub"), HUB_PARAMS).role_statements("WorkerRole")
    key_arn = "arn:aws:stand-in:::AlarmKey/Arn"
    assert allowed(worker, "kms:GenerateDataKey", key_arn) and allowed(worker, "sns:Publish", "ref:AlarmTopic")


def test_the_alarms_watch_the_dead_letters_the_queues_age_failures_and_the_orchestrator() -> None:
    resources = load_template("hub")["Resources"]
    alarms = {k: r["Properties"] for k, r in resources.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    assert all(a["AlarmActions"] == [{"Ref": "AlarmTopic"}] for a in alarms.values())
    watched = {(a["Namespace"], a["MetricName"]) for a in alarms.values()}
    assert {
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible"),
        ("AWS/SQS", "ApproximateAgeOfOldestMessage"),
        (observe.NAMESPACE, "Failures"),
        (observe.NAMESPACE, "PartsNotQueued"),
        ("AWS/Lambda", "Errors"),
    } <= watched
    # The EMF alarms watch the fleet-wide metrics the worker and orchestrator really emit.
    for a in alarms.values():
        if a["Namespace"] == observe.NAMESPACE:
            assert "Dimensions" not in a and [] in observe.dimension_sets(per_account=False)


def test_a_worker_may_run_as_long_as_the_fleet_config_is_checked_against() -> None:
    from hyperpod_scheduler.deploy.credentials import SESSION_SECONDS
    from hyperpod_scheduler.deploy.fleet_config import DEFAULT_WORKER_TIMEOUT_S

    hub = load_template("hub")
    timeout = hub["Parameters"]["WorkerTimeout"]
    assert hub["Resources"]["WorkerFunction"]["Properties"]["Timeout"] == {"Ref": "WorkerTimeout"}
    assert timeout["Default"] == DEFAULT_WORKER_TIMEOUT_S
    queue = hub["Resources"]["WorkQueue"]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * timeout["MaxValue"] and timeout["MaxValue"] < SESSION_SECONDS
    # A message outlives any marker that holds its part, and the worker knows when SQS gives up on it.
    assert queue["MessageRetentionPeriod"] > DEFAULT_QUEUED_S + queue["VisibilityTimeout"]
    env = hub["Resources"]["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    assert int(env[RECEIVES_ENV]) == queue["RedrivePolicy"]["maxReceiveCount"] == DEFAULT_MAX_RECEIVES
    assert DEFAULT_MAX_RECEIVES >= 5  # AWS's advice for a Lambda event source: a throttle counts a receive


def test_a_deleted_hub_can_be_created_again_and_its_spokes_still_trust_it() -> None:
    hub = load_template("hub")["Resources"]
    for name, resource in hub.items():
        if resource.get("DeletionPolicy") == "Retain":  # outlives the stack: no fixed name to collide with
            props = resource["Properties"]
            assert not {"LogGroupName", "TableName", "QueueName"} & set(props), name
    for function in ("OrchestratorFunction", "WorkerFunction"):
        group = hub[function]["Properties"]["LoggingConfig"]["LogGroup"]
        assert group == {"Ref": function.replace("Function", "LogGroup")}
    # The worker role's name depends only on the stack and the region: a re-created hub has the same ARN.
    assert hub["WorkerRole"]["Properties"]["RoleName"] == {"Fn::Sub": "${AWS::StackName}-worker-${AWS::Region}"}
    worker = "arn:aws:iam::111111111111:role/hps-hub-worker-eu-west-1"
    spoke = Template(load_template("spoke"), {**SPOKE_PARAMS, "HubWorkerRoleArn": worker})
    trust = spoke.trust_statements("SpokeRole")
    # Trusted by ARN as a condition, not as the principal (which IAM binds to the old role's unique id).
    assert all(s["Principal"]["AWS"] == "arn:aws:iam::111111111111:root" for s in trust)
    assert trusts(trust, worker)
    assert not trusts(trust, "arn:aws:iam::111111111111:role/other")  # the hub account's other roles
    assert not trusts(trust, "arn:aws:iam::222222222222:role/hps-hub-worker-eu-west-1")


def test_the_worker_may_not_write_the_fleet_config() -> None:
    policy = Template(load_template("hub"), HUB_PARAMS).role_statements("WorkerRole")
    table = "arn:aws:stand-in:::StateTable/Arn"
    for pk in ("rec#111111111111/us-east-1/c", "hist#111111111111/us-east-1/c", "lease#111111111111/us-east-1/c",
               "acct#us-east-1/c", "queue#111111111111/us-east-1/0of1", "rec#agent/c/intent"):  # fmt: skip
        assert allowed(policy, "dynamodb:PutItem", table, {"dynamodb:LeadingKeys": pk}), pk
    for action in ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:GetItem"):
        assert not allowed(policy, action, table, {"dynamodb:LeadingKeys": "config"})


def test_the_tick_fires_on_the_minute_in_utc() -> None:
    hub = load_template("hub")
    schedule = hub["Resources"]["TickSchedule"]["Properties"]
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    expression = schedule["ScheduleExpression"]["Fn::Sub"]
    assert expression == "cron(0/${TickMinutes} * * * ? *)"  # rate() starts whenever the schedule was made
    assert all(60 % m == 0 for m in hub["Parameters"]["TickMinutes"]["AllowedValues"])  # every hour alike
    assert schedule["Target"]["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}}


def test_a_rendered_code_key_is_written_into_both_functions_so_an_update_changes_the_code() -> None:
    # A parameter's default is read only at creation: `aws cloudformation deploy` keeps a stack's previous
    # CodeKey unless it is overridden, and the old code would keep running after an upgrade.
    for key in ("hyperpod-scheduler/lambda-0123456789abcdef.zip", "hyperpod-scheduler/lambda-fedcba9876543210.zip"):
        hub = yaml.safe_load(render("hub", {**HUB_PARAMS, "CodeKey": key}))
        assert "CodeKey" not in hub["Parameters"]  # no previous value to keep
        functions = [r for r in hub["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
        assert [f["Properties"]["Code"]["S3Key"] for f in functions] == [key, key]
    assert overrides({"CodeKey": key, "CodeBucket": "b", "AlarmEmail": "a b@c"}) == "CodeBucket=b 'AlarmEmail=a b@c'"


def _documented_deploy(stack_template: str) -> list[str]:
    """The words of the docs' `aws cloudformation deploy` command for this template file."""
    for block in code_blocks(DOCS.read_text(encoding="utf-8"), "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:3] == ["aws", "cloudformation", "deploy"] and stack_template in words:
                return words
    raise AssertionError(f"docs/deploy.md shows no `aws cloudformation deploy` of {stack_template}")


def test_the_documented_deploy_passes_every_parameter_it_sets_explicitly() -> None:
    words = _documented_deploy("hub.yaml")
    overridden = words[words.index("--parameter-overrides") + 1 :]
    names = {w.split("=", 1)[0] for w in overridden if "=" in w}
    assert set(_documented_params("hub")) - {"CodeKey"} <= names
    assert "CodeKey" not in names  # it is in the rendered template itself
    assert "hyperpod-scheduler deploy verify" in DOCS.read_text(encoding="utf-8")


def test_the_code_key_must_name_a_content_hash() -> None:
    pattern = load_template("hub")["Parameters"]["CodeKey"]["AllowedPattern"]
    assert re.fullmatch(pattern, "hyperpod-scheduler/lambda-0123456789abcdef.zip")
    assert not re.fullmatch(pattern, "hyperpod-scheduler/lambda.zip")  # a fixed key keeps the old code running


# ---- the docs' examples --------------------------------------------------------------------------


def _documented_params(template: str) -> dict[str, str]:
    """The -p Key=Value pairs of the docs' `deploy template <template>` command."""
    for block in code_blocks(DOCS.read_text(encoding="utf-8"), "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:4] == ["hyperpod-scheduler", "deploy", "template", template]:
                return dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w in ("-p", "--param"))
    raise AssertionError(f"docs/deploy.md shows no `deploy template {template}` command")


def _documented_fleet() -> Any:
    for block in code_blocks(DOCS.read_text(encoding="utf-8"), "yaml"):
        if block.startswith("# fleet.yaml"):
            return parse_fleet_yaml(block, "docs/deploy.md fleet.yaml")
    raise AssertionError("docs/deploy.md shows no fleet.yaml")


def test_every_role_the_documented_fleet_assumes_is_allowed_by_the_documented_hub() -> None:
    fleet = _documented_fleet()
    params = _documented_params("hub")
    hub = Template(load_template("hub"), {**HUB_PARAMS, **params})
    policy = hub.role_statements("WorkerRole")
    context = {"aws:ResourceOrgID": params["OrganizationId"]} if params.get("OrganizationId") else {}
    roles = {fleet.role_for(t) for t in fleet.targets}
    assert len(roles) >= 2  # the example shows the default spoke role and a custom one
    for role in roles:
        assert allowed(policy, "sts:AssumeRole", role, context), role
    assert fleet.hub.spoke_role_name in hub.params["SpokeRoleNames"]


def test_the_documented_spoke_trusts_the_hub_and_lets_the_worker_do_its_job() -> None:
    params = _documented_params("spoke")
    spoke = Template(load_template("spoke"), params)
    assert params["HubWorkerRoleArn"] and params["RoleName"] in _documented_params("hub")["SpokeRoleNames"].split(",")
    context = {"aws:PrincipalOrgID": params["OrganizationId"]} if params.get("OrganizationId") else {}
    assert trusts(spoke.trust_statements("SpokeRole"), params["HubWorkerRoleArn"], context)
    policy = spoke.role_statements("SpokeRole")
    for action in ("sagemaker:DescribeCluster", "sagemaker:ListTags"):
        assert allowed(policy, action, CLUSTER)
    assert allowed(policy, "sagemaker:ListClusters", "*")
    assert allowed(policy, "sagemaker:UpdateCluster", CLUSTER, {TAG_KEY: "office"})
    role = "arn:aws:iam::999999999999:role/" + params["ExecutionRoleNames"].split(",")[0].replace("*", "gpu")
    assert allowed(policy, "iam:PassRole", role, {"iam:PassedToService": "sagemaker.amazonaws.com"})


# ---- rendering -----------------------------------------------------------------------------------


def test_parameters_are_filled_in_as_defaults() -> None:
    text = render("hub", {"CodeBucket": "my-artefacts", "TickMinutes": "5", "LogRetentionDays": "90"})
    params = yaml.safe_load(text)["Parameters"]
    assert params["CodeBucket"]["Default"] == "my-artefacts"
    assert params["TickMinutes"]["Default"] == 5
    assert params["LogRetentionDays"]["Default"] == 90


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("hub", {"Bucket": "x"}, "no parameter 'Bucket'"),
        ("hub", {"LogRetentionDays": "8"}, "LogRetentionDays='8' is not one of"),
        ("hub", {"CodeKey": "hyperpod-scheduler/lambda.zip"}, "CodeKey='hyperpod-scheduler/lambda.zip' does not match"),
        ("hub", {"TickMinutes": "7"}, "TickMinutes='7' is not one of"),
        ("middle", {}, "template 'middle': unknown"),
    ],
)
def test_bad_template_requests_are_one_line_errors(name: str, params: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)) as err:
        render(name, params)
    assert "\n" not in str(err.value)


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
    without = Template(spoke, SPOKE_PARAMS).role_statements("SpokeRole")
    channel = [s for s in without if s.get("Sid") != "ReadSlurmRolesFromLifecycleScripts"]
    assert not any(a.startswith("s3:") for s in channel for a in actions(s))  # no bucket given: no channel


def test_the_spoke_reads_only_the_lifecycle_scripts_provisioning_parameters() -> None:
    """The engine learns an old-style Slurm cluster's controller and login groups from the
    provisioning_parameters.json at each group's LifeCycleConfig.SourceS3Uri: the spoke may read that
    file, in the named buckets (any by default), and nothing else in them."""
    spoke = load_template("spoke")
    by_sid = {s["Sid"]: s for s in statements(spoke) if "Sid" in s}
    assert actions(by_sid["ReadSlurmRolesFromLifecycleScripts"]) == ["s3:getobject"]
    key = "arn:aws:s3:::sagemaker-lifecycle-999/LifecycleScripts/base-config/provisioning_parameters.json"
    anywhere = Template(spoke, SPOKE_PARAMS).role_statements("SpokeRole")
    assert allowed(anywhere, "s3:GetObject", key)
    assert not allowed(anywhere, "s3:GetObject", key.replace("provisioning_parameters.json", "on_create.sh"))
    assert not allowed(anywhere, "s3:PutObject", key)
    assert not allowed(anywhere, "s3:ListBucket", "arn:aws:s3:::sagemaker-lifecycle-999")
    buckets = {**SPOKE_PARAMS, "LifecycleBuckets": "sagemaker-*,ml-lifecycle"}
    named = Template(spoke, buckets).role_statements("SpokeRole")
    assert allowed(named, "s3:GetObject", key)
    assert allowed(named, "s3:GetObject", "arn:aws:s3:::ml-lifecycle/provisioning_parameters.json")
    assert not allowed(named, "s3:GetObject", "arn:aws:s3:::other-bucket/x/provisioning_parameters.json")


def test_each_failing_cluster_has_its_own_failure_metric_from_the_workers_log() -> None:
    from datetime import UTC, datetime

    from hyperpod_scheduler.engine.events import Event

    resources = load_template("hub")["Resources"]
    metric = resources["ClusterFailureMetric"]["Properties"]
    assert metric["LogGroupName"] == {"Ref": "WorkerLogGroup"}
    (transform,) = metric["MetricTransformations"]
    assert transform["MetricNamespace"] == observe.NAMESPACE
    outcomes = set(re.findall(r'\$\.outcome = "(\w+)"', metric["FilterPattern"]))
    assert outcomes == set(observe.FAILURE_KINDS)  # the kinds the Failures metric counts
    line = observe.log_line(observe.Place("111111111111", "us-east-1"), Event(datetime.now(UTC), "c", "error", "x"))
    for dimension in transform["Dimensions"]:
        assert dimension["Value"].removeprefix("$.") in line  # a field every failure line carries
    assert {d["Key"] for d in transform["Dimensions"]} == {"Account", "Region", "Cluster"}
