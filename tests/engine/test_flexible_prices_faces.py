"""A flexible instance group (InstanceRequirements: ml.p5.48xlarge, ml.p4d.24xlarge; no InstanceType) kept
by a stop is priced at the dearest type it may run, labelled as an upper bound, the same in `plan`,
`status -o json`, `report --json` and the dashboard's API; with a type that has no price (ml.g6.48xlarge
is not in the bundled table) every face says the price is not known, never $0 (issue 26, case 4)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from hyperpod_scheduler.app.compose import Clients, Context
from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.cost.prices import bundled
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.web.app import create_app
from hyperpod_scheduler.web.service import Dashboard
from tests.engine.conftest import ROLE, START, settle

P5, P4D, G6 = "ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.g6.48xlarge"


def _usd(itype: str) -> float:
    price = bundled().instance(itype)
    assert price is not None
    return price.usd


def _request(types: list[str]) -> dict[str, Any]:
    def group(name: str, count: int, node: str, **kind: Any) -> dict[str, Any]:
        partitions = {"PartitionNames": [name]} if node == "Compute" else {}
        return {
            "InstanceGroupName": name,
            "InstanceCount": count,
            "ExecutionRole": ROLE,
            "SlurmConfig": {"NodeType": node, **partitions},
            **kind,
        }

    return {
        "ClusterName": "flex",
        "Orchestrator": {"Slurm": {}},
        "InstanceGroups": [
            group("controller", 1, "Controller", InstanceType="ml.m5.xlarge", ThreadsPerCore=1),
            group("gpu", 10, "Compute", InstanceRequirements={"InstanceTypes": types}),
            group("cpu", 2, "Compute", InstanceType="ml.c5.xlarge", ThreadsPerCore=1),
        ],
    }


@dataclass
class World:
    emu: Emulator
    client: Any
    config: Path
    state: Path
    types: list[str]  # the flexible group's

    def cli(self, *args: str) -> Any:
        result = CliRunner().invoke(app, [*args, "-c", str(self.config), "--state", str(self.state)])
        assert result.exit_code == 0, result.output
        return result.output

    def stop(self) -> None:
        """The stop through the composed engine on the emulator's clock (a wait moves that clock)."""
        store = open_store(str(self.state))
        clients = Clients(
            sagemaker=lambda ref: self.client, s3=lambda ref: None, sns=lambda r: None, pricing=lambda: None
        )
        ctx = Context(
            load_config(self.config), store, clients, self.emu.clock.now, sleep=self.emu.advance, notify=False
        )
        g = ctx.fleet().find("flex")
        assert g is not None
        result = ctx.engine().act(g.ref, "stop", transition_id="stop-1", wait=True, poll_seconds=60)
        assert result.kind == "settled", result
        store.close()


@pytest.fixture(params=[[P4D, P5], [P5, G6]], ids=["priced", "g6-unpriced"])
def world(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[World]:
    capacity = {"instance_types": {P5: 16}}
    with running_emulator(virtual_start=START, seed=3, in_process=True, capacity=capacity) as emu:
        for var, value in (
            ("AWS_ENDPOINT_URL", emu.endpoint),
            ("AWS_ACCESS_KEY_ID", "t"),
            ("AWS_SECRET_ACCESS_KEY", "t"),
            ("AWS_DEFAULT_REGION", "us-east-1"),
            ("XDG_CONFIG_HOME", str(tmp_path)),
        ):
            monkeypatch.setenv(var, value)
        client = boto3.client("sagemaker", endpoint_url=emu.endpoint)
        client.create_cluster(**_request(request.param))
        settle(emu, client, "flex")
        config = tmp_path / "c.yaml"
        config.write_text(
            "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
            "targets: [{region: us-east-1, clusters: [{name: flex, schedule: office}]}]\n"
        )
        yield World(emu, client, config, tmp_path / "s.db", request.param)


def test_every_face_prices_a_kept_flexible_group_at_its_dearest_type_as_an_upper_bound(world: World) -> None:
    each = None if G6 in world.types else _usd(P5)  # the dearest of p4d and p5; g6 has no price

    # plan: what keeping the group costs a night, "up to".
    row = json.loads(world.cli("plan", "--json"))["clusters"][0]
    kept = {p["group"]: p for p in row["protected"]}
    assert set(kept) >= {"gpu", "controller"}
    if each is None:
        assert kept["gpu"]["keep_cost_per_night_usd"] is None and kept["gpu"]["price_is_upper_bound"] is False
    else:
        night = round(each * 10 * row["night_hours"], 2)
        assert kept["gpu"]["keep_cost_per_night_usd"] == pytest.approx(night, abs=0.01)
        assert kept["gpu"]["price_is_upper_bound"] is True
        assert f"keeps gpu at 10 (up to ${night:,.0f} per" in world.cli("plan")
    assert kept["controller"]["price_is_upper_bound"] is False

    world.stop()

    # status -o json: what still bills while stopped.
    (status,) = [r for r in json.loads(world.cli("status", "-o", "json")) if r["cluster"] == "flex"]
    billing = {b["group"]: b for b in status["billing"]}
    assert set(billing["gpu"]["instance_types"]) == set(world.types) and billing["gpu"]["instance_type"] is None
    if each is None:
        assert billing["gpu"]["usd_per_hour"] is None and status["usd_per_hour"] is None  # not $0
    else:
        assert billing["gpu"]["usd_per_hour"] == pytest.approx(10 * each)
        assert billing["gpu"]["price_is_upper_bound"] is True and status["price_is_upper_bound"] is True
        assert "up to $" in status["state_text"]

    # report --json: the night's kept cost (the gpu group stayed up) is an upper bound.
    now = world.emu.clock.now()
    since, until = (now - timedelta(hours=1)).isoformat(), (now + timedelta(hours=10)).isoformat()
    report = json.loads(world.cli("report", "--json", "--no-fsx", "--since", since, "--until", until))
    (cluster,) = report["clusters"]
    if each is None:
        assert cluster["price_is_upper_bound"] is False
        assert any(G6 in u for u in cluster["unpriced"])
    else:
        assert cluster["price_is_upper_bound"] is True and cluster["upper_bound_groups"] == ["gpu"]
        assert report["total"]["price_is_upper_bound"] is True
        assert f"instance_hourly {P5}" in [p["item"] for p in report["prices"]]

    # The dashboard's API: the same row as status, and tonight's bill "up to".
    dash = Dashboard(config_file=str(world.config), state=str(world.state), now=world.emu.clock.now)
    web = TestClient(create_app(dash, allowed_hosts=["testserver"]))
    rows = web.get("/api/fleet").json()
    page = web.get("/").text
    confirm = web.get("/clusters/flex/actions/start").text  # the manual start's confirmation
    dash.close()
    (api,) = [r for r in rows if r["cluster"] == "flex"]
    assert api["billing"] == status["billing"] and api["price_is_upper_bound"] == status["price_is_upper_bound"]
    if each is not None:
        assert api["tonight"]["price_is_upper_bound"] is True
        assert "bills up to $" in page  # the Fleet page's "tonight" cell
        assert "Bills <strong>up to $" in confirm
    else:  # it bills (the group is kept), an amount not known: not the controller's price alone
        assert api["tonight"]["bills"] is True and api["tonight"]["usd"] is None
        assert "bills an unknown amount" in page and "up to $" not in page
        assert "an unknown amount (no price for gpu)" in confirm
