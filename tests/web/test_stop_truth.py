"""Issue 27: what a stop keeps is computed once, by the planner and the guards (``app.actions``), and
every face shows that one answer: the dashboard's stop preview, its cluster page ("at stop", "never
stopped", the buttons), the Schedules page, and ``plan``.

The cluster here is built from the aws-samples lifecycle scripts: no SlurmConfig, its roles only in
provisioning_parameters.json (learned by the first stop and remembered). The pages used to judge from
DescribeCluster and the capacity protections alone, so they zeroed a controller the stop keeps with
its protected workers, and painted stopped a cluster whose stop sends nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from hyperpod_scheduler.app.compose import Clients, Context
from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.cli.main import app as cli_app
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.web import Dashboard, create_app
from tests.engine.conftest import START, settle
from tests.engine.legacy_slurm import BUCKET, PARAMETERS, legacy_group
from tests.sessions import shared_session
from tests.web.conftest import TOKEN


@dataclass
class Rig:
    emu: Emulator
    sagemaker: Any
    config: Path
    state: Path

    def dashboard(self) -> Dashboard:
        return Dashboard(
            config_file=str(self.config),
            state=str(self.state),
            token=TOKEN,
            now=self.emu.clock.now,
            client_for=lambda ref: self.sagemaker,
            aws=AwsClients(self.emu.endpoint),  # FSx, S3 and Pricing from the emulator too, as the demo's
        )

    def api(self) -> TestClient:
        return TestClient(create_app(self.dashboard(), allowed_hosts=["testserver"]))

    def plan(self, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", self.emu.endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "t")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "t")
        out = CliRunner().invoke(
            cli_app, ["plan", "-o", "json", "--config", str(self.config), "--state", str(self.state)]
        )
        assert out.exit_code == 0, out.output
        (row,) = json.loads(out.output)["clusters"]
        return dict(row)


def _rig(tmp: Path, policy: dict[str, Any], *, restart: bool, first_stop: bool = True) -> Iterator[Rig]:
    with running_emulator(virtual_start=START, seed=5, in_process=True) as emu:
        session = shared_session()
        sagemaker = session.client("sagemaker", endpoint_url=emu.endpoint)
        s3 = session.client("s3", endpoint_url=emu.endpoint)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key="src/on_create.sh", Body=b"#!/bin/bash\n")
        s3.put_object(Bucket=BUCKET, Key="src/provisioning_parameters.json", Body=json.dumps(PARAMETERS).encode())
        groups: list[Any] = [
            legacy_group("controller-machine", "ml.m5.12xlarge", 1),
            legacy_group("login-group", "ml.m5.4xlarge", 1),
            legacy_group("worker-group-1", "ml.p5.48xlarge", 4),
        ]
        sagemaker.create_cluster(ClusterName="legacy", InstanceGroups=groups)  # no SlurmConfig
        settle(emu, sagemaker, "legacy")
        config, state = tmp / "hyperpod-scheduler.yaml", tmp / "state.sqlite"
        document = {
            "state": str(state),
            "defaults": {"policy": policy},
            "schedules": {"office": {"windows": ["Mon-Fri 08:00-18:00 UTC"]}},
            "targets": [{"region": "us-east-1", "clusters": [{"name": "legacy", "schedule": "office"}]}],
        }
        config.write_text(yaml.safe_dump(document), encoding="utf-8")
        clients = Clients(sagemaker=lambda r: sagemaker, s3=lambda r: s3, sns=lambda r: None, pricing=lambda: None)
        with open_store(str(state)) as store:
            ctx = Context(load_config(config), store, clients, emu.clock.now, sleep=emu.advance, notify=False)
            g = ctx.fleet().find("legacy")
            assert g is not None
            # The first stop reads provisioning_parameters.json and remembers the roles in the record.
            if first_stop:
                ctx.engine().act(g.ref, "stop", transition_id="stop-1", wait=True, poll_seconds=60)
            if restart:
                ctx.engine().act(g.ref, "start", transition_id="start-1", wait=True, poll_seconds=60)
            settle(emu, sagemaker, "legacy")
        yield Rig(emu, sagemaker, config, state)


@pytest.fixture
def floor_two(tmp_path: Path) -> Iterator[Rig]:
    # The P5s may go (release_scarce_capacity), but a floor keeps 2 of them: the head stays with them.
    yield from _rig(
        tmp_path, {"release_scarce_capacity": True, "groups": {"worker-group-1": {"floor": 2}}}, restart=True
    )


@pytest.fixture
def kept_whole(tmp_path: Path) -> Iterator[Rig]:
    # A floor at the group's whole size: the stop keeps the workers, and the head with them, so it
    # sends nothing at all; the record says "stopped" so the schedule does not retry it.
    yield from _rig(
        tmp_path, {"release_scarce_capacity": True, "groups": {"worker-group-1": {"floor": 4}}}, restart=False
    )


KEPT_HEAD = {"controller-machine": 1, "login-group": 1}


def test_the_stop_preview_and_plan_keep_the_slurm_head_the_stop_keeps(
    floor_two: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    preview = floor_two.api().get("/api/clusters/legacy/preview/stop").json()
    after = {g["group"]: g["after"] for g in preview["groups"]}
    assert after == {**KEPT_HEAD, "worker-group-1": 2}, preview
    kinds = {g["group"]: g["kept_by"] for g in preview["groups"]}
    assert kinds == {"controller-machine": "slurm head", "login-group": "slurm head", "worker-group-1": "floor"}
    assert preview["nothing"] is None  # 4 -> 2 P5s: the stop sends an update
    row = floor_two.plan(monkeypatch)
    assert {p["group"]: p["keep_at"] for p in row["protected"]} == after  # the CLI says the same
    assert not any("zeroes the Slurm controller" in w for w in row["warnings"])
    page = floor_two.api().get("/api/clusters/legacy").json()
    assert {p["group"]: p["keep_at"] for p in page["protected_groups"]} == after  # "at stop" on its page
    # The Schedules page's "a week not billed" is worth what the preview says a stop saves an hour.
    (schedule,) = floor_two.api().get("/api/schedules").json()["schedules"]
    assert preview["usd_per_hour_saved"] > 0
    assert schedule["releasable_usd_per_hour"] == preview["usd_per_hour_saved"]


def test_a_cluster_whose_stop_sends_nothing_only_for_a_floor_is_not_painted_stopped(
    kept_whole: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = kept_whole.api()
    preview = api.get("/api/clusters/legacy/preview/stop").json()
    assert preview["nothing"] == "every group with nodes is protected: nothing would be sent", preview
    assert all(g["after"] == g["now"] for g in preview["groups"])
    page = api.get("/api/clusters/legacy").json()
    assert page["state"] == "running", page["state_text"]  # the stop sent nothing: everything runs
    assert page["at_stop"]["never_stopped"] and page["at_stop"]["outcome"] == "nothing"
    assert "start" not in page["actions"] and "stop" in page["actions"]
    (schedule,) = api.get("/api/schedules").json()["schedules"]
    assert schedule["never_stopped"] == ["legacy"]
    assert "disabled>Confirm stop" in api.get("/clusters/legacy/actions/stop").text
    row = kept_whole.plan(monkeypatch)
    assert {p["group"]: p["keep_at"] for p in row["protected"]} == {**KEPT_HEAD, "worker-group-1": 4}
    assert row["stop"]["outcome"] == "nothing"


@pytest.fixture
def never_stopped_yet(tmp_path: Path) -> Iterator[Rig]:
    # No stop yet: the record remembers no Slurm roles; the first stop reads them from S3.
    yield from _rig(
        tmp_path,
        {"release_scarce_capacity": True, "groups": {"worker-group-1": {"floor": 2}}},
        restart=False,
        first_stop=False,
    )


def test_the_first_stops_preview_is_what_the_first_stop_sends(never_stopped_yet: Rig) -> None:
    api = never_stopped_yet.api()
    preview = api.get("/api/clusters/legacy/preview/stop").json()
    done = api.post("/clusters/legacy/actions/stop", data={"token": TOKEN, "by": "bob"})
    assert done.status_code == 200, done.text
    sent = {
        g["InstanceGroupName"]: g["TargetCount"]
        for g in never_stopped_yet.sagemaker.describe_cluster(ClusterName="legacy")["InstanceGroups"]
    }
    assert {g["group"]: g["after"] for g in preview["groups"]} == sent, preview
