"""What a start brings back is the planner's own answer (``engine.start_forecast`` through
``app.actions``), the one the engine acts on: the dashboard's start preview used to promise "back to
2" from the recorded sizes alone, for a group replaced while stopped (the engine refuses that start)
and for a group a person set by hand while stopped (the engine keeps it)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from botocore.config import Config as BotoConfig
from fastapi.testclient import TestClient

from hyperpod_scheduler.app.compose import Context, chain_clients
from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.web import Dashboard, create_app
from tests.engine.conftest import ROLE, START, settle
from tests.sessions import shared_session

NAME = "c1"


@dataclass
class Rig:
    emu: Emulator
    client: Any
    config: Path
    state: Path

    def context(self, store: Any) -> Context:
        return Context(load_config(self.config), store, chain_clients(lambda ref: self.client), self.emu.clock.now)

    def tick(self) -> list[str]:
        with open_store(str(self.state)) as store:
            ctx = self.context(store)
            return [r.kind for r in ctx.tick(ctx.fleet().governed())]

    def dry_start(self) -> Any:
        with open_store(str(self.state)) as store:
            ctx = self.context(store)
            [g] = ctx.fleet().governed()
            return ctx.engine().act(g.ref, "start", transition_id="manual-start@preview", dry_run=True)

    def preview(self) -> dict[str, Any]:
        dash = Dashboard(
            config_file=str(self.config),
            state=str(self.state),
            now=self.emu.clock.now,
            client_for=lambda r: self.client,
            aws=AwsClients(self.emu.endpoint),
        )
        answer = TestClient(create_app(dash, allowed_hosts=["testserver"])).get(f"/api/clusters/{NAME}/preview/start")
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def update(self, groups: list[dict[str, Any]], delete: list[str] | None = None) -> None:
        self.emu.backend.dispatch(
            "UpdateCluster", {"ClusterName": NAME, "InstanceGroups": groups, "InstanceGroupsToDelete": delete or []}
        )
        settle(self.emu, self.client, NAME)

    def group(self, name: str) -> dict[str, Any]:
        d = self.client.describe_cluster(ClusterName=NAME)
        g = next(g for g in d["InstanceGroups"] if g["InstanceGroupName"] == name)
        keep = ("InstanceGroupName", "InstanceType", "ExecutionRole", "LifeCycleConfig", "InstanceStorageConfigs")
        return {**{k: g[k] for k in keep if k in g}, "InstanceCount": g.get("TargetCount", g["CurrentCount"])}


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    with running_emulator(virtual_start=START, seed=5, in_process=True) as emu:
        session = shared_session()
        client = session.client("sagemaker", endpoint_url=emu.endpoint, config=BotoConfig(retries={"max_attempts": 1}))
        client.create_cluster(
            **slurm_request(NAME, {"cpu": ("ml.c5.xlarge", 2), "web": ("ml.c5.xlarge", 1)}, role=ROLE)
        )
        settle(emu, client, NAME)
        config, state = tmp_path / "hyperpod-scheduler.yaml", tmp_path / "state.sqlite"
        document = {
            "state": str(state),
            "targets": [{"region": "us-east-1", "clusters": [{"name": NAME, "schedule": "Mon-Fri 08:00-18:00 UTC"}]}],
        }
        config.write_text(yaml.safe_dump(document), encoding="utf-8")
        rig = Rig(emu, client, config, state)
        rig.tick()  # Monday 06:00: stopped, its sizes recorded
        settle(emu, client, NAME)
        rig.tick()
        yield rig


def _groups(preview: dict[str, Any]) -> dict[str, tuple[int, str]]:
    return {g["group"]: (g["after"], g["change"]) for g in preview["groups"]}


def test_the_start_preview_brings_back_the_recorded_sizes(rig: Rig) -> None:
    shown = rig.preview()
    assert _groups(shown) == {"controller": (1, "back to 1"), "cpu": (2, "back to 2"), "web": (1, "back to 1")}, shown[
        "groups"
    ]
    assert shown["nothing"] is None and shown["outcome"] == "sends"
    assert rig.dry_start().kind != "refused"


def test_a_start_onto_a_group_replaced_while_stopped_is_previewed_refused(rig: Rig) -> None:
    cpu = rig.group("cpu")
    rig.update([], delete=["cpu"])
    rig.update([{**cpu, "InstanceType": "ml.c5.2xlarge", "InstanceCount": 0}])
    shown = rig.preview()
    assert shown["outcome"] == "refused", shown
    assert "replaced while stopped" in shown["nothing"], shown["nothing"]
    assert _groups(shown) == {"controller": (0, "as it is"), "cpu": (0, "as it is"), "web": (0, "as it is")}, shown[
        "groups"
    ]
    assert shown["usd_per_hour_after"] == 0.0
    engine = rig.dry_start()  # the engine's own answer is the preview's
    assert engine.kind == "refused" and "replaced while stopped" in engine.message, engine


def test_a_group_set_by_hand_while_stopped_is_previewed_as_it_is(rig: Rig) -> None:
    rig.update([{**rig.group("web"), "InstanceCount": 3}])
    shown = rig.preview()
    assert _groups(shown) == {"controller": (1, "back to 1"), "cpu": (2, "back to 2"), "web": (3, "as it is")}, shown[
        "groups"
    ]
    assert any("set to 3 by hand" in n for n in shown["notes"]), shown["notes"]


def test_the_confirm_page_says_why_a_group_is_left_as_it_is(rig: Rig) -> None:
    rig.update([{**rig.group("web"), "InstanceCount": 3}])
    dash = Dashboard(
        config_file=str(rig.config),
        state=str(rig.state),
        now=rig.emu.clock.now,
        client_for=lambda r: rig.client,
        aws=AwsClients(rig.emu.endpoint),
    )
    page = TestClient(create_app(dash, allowed_hosts=["testserver"])).get(f"/clusters/{NAME}/actions/start")
    assert page.status_code == 200, page.text
    assert "group &#39;web&#39; was set to 3 by hand while stopped: keeping 3" in page.text, page.text
