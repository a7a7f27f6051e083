"""End to end through the CLI: a cluster whose answers carry AutoPatchConfig, image versions and a member
botocore does not know is stopped and started without losing any of them (or not at all)."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore
import pytest
from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.emulator import running_emulator
from tests.aws.proxy import AnswerProxy, add_to_group, answer_proxy
from tests.engine.conftest import three_tier_request

runner = CliRunner()
PATCH = {
    "PatchingStrategy": "DrainFirst",  # the model: DrainPolicy is valid only with DrainFirst
    "IdleWaitWindowInSeconds": 7200,
    "DrainPolicy": {"DrainTimeoutInSeconds": 600, "OnDrainTimeout": "Skip"},
}


def _request() -> dict[str, Any]:
    request = three_tier_request()
    for g in request["InstanceGroups"]:
        g["ImageReleaseVersion"] = "1.0.0"
        if g["InstanceGroupName"] == "dev":
            g["AutoPatchConfig"] = copy.deepcopy(PATCH)
    return request


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[AnswerProxy, dict[str, Any]]]:
    unknown: dict[str, Any] = {"on": True}

    def rewrite(operation: str, answer: Any) -> Any:
        return add_to_group("train", "FancyNewSetting", {"Mode": "On"})(operation, answer) if unknown["on"] else answer

    with running_emulator(speed=3000, seed=11) as emu, answer_proxy(emu.endpoint, rewrite) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", proxy.endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.chdir(tmp_path)
        client = boto3.client("sagemaker", endpoint_url=emu.endpoint)
        client.create_cluster(**_request())
        for _ in range(400):
            d = client.describe_cluster(ClusterName="c1")
            if d["ClusterStatus"] == "InService" and all(
                g["CurrentCount"] == g["TargetCount"] for g in d["InstanceGroups"]
            ):
                break
            time.sleep(0.05)
        yield proxy, unknown


def _cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_stop_and_start_keep_every_member_or_refuse(served: tuple[AnswerProxy, dict[str, Any]], tmp_path: Path) -> None:
    proxy, unknown = served
    state = str(tmp_path / "state.sqlite")
    (tmp_path / "hyperpod-scheduler.yaml").write_text("defaults: {poll_seconds: 0.05}\n")

    code, out = _cli("stop", "c1", "--wait", "--state", state)
    assert code == 1, out
    assert "FancyNewSetting" in out and f"botocore {botocore.__version__}" in out
    assert proxy.sent("UpdateCluster") == []
    code, out = _cli("status", "--json", "--state", state)
    assert json.loads(out)[0]["refused"]["action"] == "stop"

    # Accepted by name for this cluster: the stop goes out, and only that member is lost.
    (tmp_path / "hyperpod-scheduler.yaml").write_text(
        "defaults: {poll_seconds: 0.05}\n"
        "targets: [{region: us-east-1, clusters: [{name: c1, schedule: office,\n"
        "  policy: {accept_unknown_members: [FancyNewSetting]}}]}]\n"
        "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
    )
    code, out = _cli("stop", "c1", "--wait", "--state", state)
    assert code == 0, out
    unknown["on"] = False
    code, out = _cli("start", "c1", "--wait", "--state", state)
    assert code == 0, out

    for update in proxy.sent("UpdateCluster"):
        groups = {g["InstanceGroupName"]: g for g in update["InstanceGroups"]}
        assert groups["dev"]["AutoPatchConfig"] == PATCH
        assert {g["ImageReleaseVersion"] for g in groups.values()} == {"1.0.0"}
        assert groups["dev"]["LifeCycleConfig"]["OnInitComplete"] == "ext.sh"
        assert "LifeCycleConfig" not in groups["controller"]
    code, out = _cli("status", "--json", "--state", state)
    assert json.loads(out)[0]["ami_changes"] == []


def test_plan_says_which_clusters_will_not_be_updated(
    served: tuple[AnswerProxy, dict[str, Any]], tmp_path: Path
) -> None:
    (tmp_path / "hyperpod-scheduler.yaml").write_text(
        "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
        "targets: [{region: us-east-1, schedule: office, clusters: [c1]}]\n"
    )
    code, out = _cli("plan", "--state", str(tmp_path / "state.sqlite"))
    assert code == 0, out
    assert "c1: no stop or start will be sent: group 'train' carries" in " ".join(out.split())
    code, out = _cli("plan", "--json", "--state", str(tmp_path / "state.sqlite"))
    assert "FancyNewSetting" in json.loads(out)["clusters"][0]["refused"]
