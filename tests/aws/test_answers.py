"""SageMaker answers checked raw, before botocore parses them: unknown members found, damage named."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from hyperpod_scheduler.aws.answers import UNKNOWN_KEY, check_answer, unknown_in, watch
from hyperpod_scheduler.aws.model import operation_model
from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.errors import HyperpodSchedulerError, MalformedAnswer
from tests.aws.proxy import add_to_group as add_group_member
from tests.aws.proxy import answer_proxy
from tests.engine.conftest import three_tier_request
from tests.sessions import shared_session

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
        client = watch(shared_session().client("sagemaker", endpoint_url=proxy.endpoint))
        client.create_cluster(**three_tier_request())
        with pytest.raises(MalformedAnswer) as caught:
            client.describe_cluster(ClusterName="c1")
    assert said in str(caught.value) and str(caught.value).startswith("DescribeCluster answer:")


def test_version_names_the_botocore_in_use() -> None:
    import botocore

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert f"botocore {botocore.__version__}" in result.output


# ---- issue 19: values botocore's parser would choke on, and damage that reaches the CLI -------------


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"CreationTime": "yesterday"}, 'CreationTime is "yesterday", expected a timestamp'),
        ({"CreationTime": 1e300}, "CreationTime is 1e+300, expected a timestamp"),
        ({"CreationTime": True}, "CreationTime is true, expected a timestamp"),
        ({"InstanceGroups": [{"InstanceGroupName": "g", "CurrentCount": 2**40}]}, "expected an integer"),
        ({"InstanceGroups": [{"InstanceGroupName": "g", "CurrentCount": 1.0}]}, "expected an integer"),
        ({"ClusterName": 7}, "ClusterName is 7, expected a string"),
    ],
)
def test_values_the_parser_cannot_read_are_named(answer: dict[str, Any], said: str) -> None:
    with pytest.raises(MalformedAnswer) as caught:
        check_answer(DESCRIBE, {**_answer(), **answer}, "DescribeCluster")
    assert said in str(caught.value)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'{"ClusterName": "c\xff1"}', "not UTF-8 text (byte 0xff)"),
        (b'{"ClusterName": "\\ud800"}', "not valid Unicode"),
        (b'{"ClusterName": "c1", "CreationTime": "yesterday"}', 'CreationTime is "yesterday"'),
        (b'{"ClusterArn": NaN}', "not JSON"),
    ],
)
def test_encodings_and_timestamps_through_boto3_are_one_clear_error(emu: Emulator, body: bytes, said: str) -> None:
    with answer_proxy(emu.endpoint, lambda op, answer: body if op == "DescribeCluster" else answer) as proxy:
        client = watch(shared_session().client("sagemaker", endpoint_url=proxy.endpoint))
        client.create_cluster(**three_tier_request())
        with pytest.raises(MalformedAnswer) as caught:
            client.describe_cluster(ClusterName="c1")
    assert said in str(caught.value) and str(caught.value).startswith("DescribeCluster answer:")


def test_other_json_services_answers_are_checked_too() -> None:
    from hyperpod_scheduler.aws.answers import check_answer as check
    from hyperpod_scheduler.aws.clients import session

    fsx = session(region="us-east-1").client("fsx")
    shape = fsx.meta.service_model.operation_model("DescribeFileSystems").output_shape
    assert shape is not None
    with pytest.raises(MalformedAnswer, match=r'FileSystems\[0\]\.CreationTime is "soon", expected a timestamp'):
        check(shape, {"FileSystems": [{"FileSystemId": "fs-1", "CreationTime": "soon"}]}, "DescribeFileSystems")
    with pytest.raises(MalformedAnswer, match=r"FileSystems is \{\}, expected a list"):
        check(shape, {"FileSystems": {}}, "DescribeFileSystems")


def _cli_env(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL_SAGEMAKER": endpoint,
        "AWS_ACCESS_KEY_ID": "t",
        "AWS_SECRET_ACCESS_KEY": "t",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"", "an empty body with HTTP 200"),
        (b'{"ClusterArn": "arn:aws:sag', "not JSON (truncated, or an HTML page?)"),
        (b"<html><body>Service Unavailable</body></html>", "not JSON (truncated, or an HTML page?)"),
        (b"[1,2,3]", "the answer is [1, 2, 3], expected an object"),
    ],
)
@pytest.mark.parametrize("command", [("cluster", "describe", "c1"), ("stop", "c1", "--state", "memory:")])
def test_a_damaged_answer_is_one_line_and_exit_1_in_the_cli(
    emu: Emulator, body: bytes, said: str, command: tuple[str, ...]
) -> None:
    """Used to be "ClusterArn is None", or an empty table and exit 0."""
    from tests.reliability.cli_inproc import cli

    emu.backend.dispatch("CreateCluster", three_tier_request())
    with answer_proxy(emu.endpoint, lambda op, answer: body if op == "DescribeCluster" else answer) as proxy:
        ran = cli(*command, env=_cli_env(proxy.endpoint))
        assert proxy.sent("UpdateCluster") == []
    line = ran.one_error_line()
    assert ran.code == 1 and said in line and "ClusterArn is None" not in line


def test_a_count_sent_as_text_is_an_error_not_a_zero(emu: Emulator) -> None:
    from tests.reliability.cli_inproc import cli

    emu.backend.dispatch("CreateCluster", three_tier_request())
    with answer_proxy(emu.endpoint, add_group_member("dev", "CurrentCount", "2")) as proxy:
        ran = cli("cluster", "describe", "c1", env=_cli_env(proxy.endpoint))
    assert 'InstanceGroups[1].CurrentCount is "2", expected an integer' in ran.one_error_line()


def test_a_malformed_answer_affects_only_its_cluster(emu: Emulator, tmp_path: Any) -> None:
    from tests.reliability.cli_inproc import cli

    for name in ("c1", "c2"):
        emu.backend.dispatch("CreateCluster", three_tier_request(name))
    emu.advance(3600)

    def garble_c1(op: str, answer: Any) -> Any:
        return b'{"ClusterName": "c1", "InstanceGroups": {"a": 1}}' if answer.get("ClusterName") == "c1" else answer

    config = tmp_path / "c.yaml"
    config.write_text("targets: [{region: us-east-1, schedule: never, clusters: [c1, c2]}]\n")
    with answer_proxy(emu.endpoint, garble_c1) as proxy:
        ran = cli("tick", "--config", str(config), "--state", str(tmp_path / "s.db"), env=_cli_env(proxy.endpoint))
        updated = [u["ClusterName"] for u in proxy.sent("UpdateCluster")]
    assert ran.code == 1 and updated == ["c2"]
    assert 'InstanceGroups is {"a": 1}, expected a list' in ran.out and "c1" in ran.out


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"__type": "\xff"}',
        b'{"__type": 5, "message": [1]}',
        b"[1, 2]",
        b'{"__type": {"a": 1}}',
    ],
)
@pytest.mark.parametrize("status", [400, 500])
def test_a_damaged_error_answer_is_still_a_client_error(status: int, body: bytes) -> None:
    """botocore's error parser raised RecursionError, UnicodeDecodeError, TypeError or AttributeError on
    these: outside every handler (exit 70, and a tick that stopped for every cluster)."""
    from botocore.awsrequest import AWSResponse
    from botocore.exceptions import ClientError

    from hyperpod_scheduler.aws import deadlines
    from hyperpod_scheduler.aws.clients import sagemaker_client
    from hyperpod_scheduler.aws.deadlines import Deadlines, _Buffered

    deadlines.use(Deadlines(total_s=2))
    try:
        client = sagemaker_client(
            region="us-east-1", endpoint_url="http://x.invalid", aws_access_key_id="t", aws_secret_access_key="t"
        )
    finally:
        deadlines.use(None)
    headers = {"Content-Type": "application/x-amz-json-1.1"}
    client.meta.events.register_first(
        "before-send", lambda request, **_: AWSResponse(request.url, status, headers, _Buffered(body))
    )
    with pytest.raises((ClientError, HyperpodSchedulerError)) as caught:
        client.describe_cluster(ClusterName="c1")
    if isinstance(caught.value, ClientError):
        assert caught.value.response["Error"]["Code"] == str(status)
        assert "error body that could not be read" in caught.value.response["Error"]["Message"]
