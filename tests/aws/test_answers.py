"""SageMaker answers checked raw, before botocore parses them: unknown members found, damage named."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from hyperpod_scheduler.aws.answers import UNKNOWN_KEY, check_answer, unknown_in, watch
from hyperpod_scheduler.aws.model import operation_model
from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.errors import MalformedAnswer
from tests.aws.proxy import answer_proxy
from tests.engine.conftest import three_tier_request

DESCRIBE = operation_model("DescribeCluster").output_shape
assert DESCRIBE is not None


def _answer(**group: Any) -> dict[str, Any]:
    return {
        "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc",
        "ClusterName": "c1",
        "ClusterStatus": "InService",
        "InstanceGroups": [{"InstanceGroupName": "workers", "CurrentCount": 1, **group}],
    }


def test_known_answers_have_no_unknown_members() -> None:
    labels = {"KubernetesConfig": {"CurrentLabels": {"any/key": "v"}, "DesiredLabels": {"team.io/x": "y"}}}
    assert check_answer(DESCRIBE, _answer(**labels), "DescribeCluster") == []  # map keys are data, not members


def test_unknown_members_are_found_at_every_depth_with_their_group() -> None:
    answer = _answer(NewKnob=1, AutoPatchConfig={"PatchingStrategy": "WhenIdle", "Cadence": "weekly"})
    answer["ClusterTopology"] = {"Zones": 2}
    found = check_answer(DESCRIBE, answer, "DescribeCluster")
    assert [(u.path, u.member, u.group) for u in found] == [
        ("InstanceGroups[0].NewKnob", "NewKnob", "workers"),
        ("InstanceGroups[0].AutoPatchConfig.Cadence", "Cadence", "workers"),
        ("ClusterTopology", "ClusterTopology", None),
    ]


def test_a_null_member_is_not_a_setting() -> None:
    assert check_answer(DESCRIBE, _answer(NewKnob=None), "DescribeCluster") == []


@pytest.mark.parametrize(
    ("group", "said"),
    [
        ({"CurrentCount": "2"}, 'InstanceGroups[0].CurrentCount is "2", expected an integer'),
        ({"CurrentCount": True}, "InstanceGroups[0].CurrentCount is true, expected an integer"),
        ({"SlurmConfig": "Compute"}, 'InstanceGroups[0].SlurmConfig is "Compute", expected an object'),
        ({"InstanceStorageConfigs": {"a": 1}}, 'InstanceGroups[0].InstanceStorageConfigs is {"a": 1}, expected a list'),
    ],
)
def test_a_value_of_the_wrong_kind_is_named(group: dict[str, Any], said: str) -> None:
    with pytest.raises(MalformedAnswer, match="DescribeCluster answer: ") as caught:
        check_answer(DESCRIBE, _answer(**group), "DescribeCluster")
    assert said in str(caught.value)


def test_long_values_are_cut_short_in_the_message() -> None:
    with pytest.raises(MalformedAnswer) as caught:
        check_answer(DESCRIBE, _answer(SlurmConfig="x" * 10_000), "DescribeCluster")
    assert len(str(caught.value)) < 200


def test_a_client_that_is_not_watched_reports_nothing() -> None:
    assert unknown_in({"ClusterArn": "x"}) == ()
    assert unknown_in({UNKNOWN_KEY: "garbage"}) == ()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"", "an empty body with HTTP 200"),
        (b"<html><body>Service Unavailable</body></html>", "not JSON (truncated, or an HTML page?)"),
        (b'{"ClusterArn": "arn:aws:sag', "not JSON (truncated, or an HTML page?)"),
        (b"[1, 2, 3]", "the answer is [1, 2, 3], expected an object"),
        (b'{"InstanceGroups": {"a": 1}}', 'InstanceGroups is {"a": 1}, expected a list'),
        (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
    ],
)
def test_a_damaged_body_through_boto3_is_one_clear_error(emu: Emulator, body: bytes, said: str) -> None:
    with answer_proxy(emu.endpoint, lambda op, answer: body if op == "DescribeCluster" else answer) as proxy:
        client = watch(
            boto3.Session(aws_access_key_id="t", aws_secret_access_key="t", region_name="us-east-1").client(
                "sagemaker", endpoint_url=proxy.endpoint
            )
        )
        client.create_cluster(**three_tier_request())
        with pytest.raises(MalformedAnswer) as caught:
            client.describe_cluster(ClusterName="c1")
    assert said in str(caught.value) and str(caught.value).startswith("DescribeCluster answer:")


def test_version_names_the_botocore_in_use() -> None:
    import botocore

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert f"botocore {botocore.__version__}" in result.output
