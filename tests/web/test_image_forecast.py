"""The dashboard's cluster page (and its API) says, per group, what the next morning does to its AMI
release (issue 32): the change it makes, one awaiting approval, a release refused after its first
morning failed (with `allow-image` as the way back), or that the group stays where it is. It is the
engine's one forecast (``engine.image_update.evening``), the one `plan` prints: the two are compared."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.cli.main import app as cli_app
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.store.records import ClusterRecord, ImageState
from hyperpod_scheduler.web import create_app
from hyperpod_scheduler.web.service import Dashboard
from tests.engine.test_images import NAME, Rig, emulated


@pytest.fixture
def rig() -> Iterator[Rig]:
    with emulated() as made:
        yield made


def _config(tmp_path: Path, **policy: Any) -> Path:
    config = tmp_path / "hyperpod-scheduler.yaml"
    document = {
        "state": str(tmp_path / "state.sqlite"),
        "defaults": {"policy": {"image": "security", "image_groups": {"cpu": "pinned"}, **policy}},
        "schedules": {"office": {"windows": ["Mon-Fri 08:00-18:00 UTC"]}},
        "targets": [{"region": "us-east-1", "clusters": [{"name": NAME, "schedule": "office"}]}],
        # Long settled by the wall clock `plan` reads and by the emulator's alike.
        "image_releases": [{"version": "1.3.0", "released": "2026-01-05", "security": True}],
    }
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    return config


def _page(rig: Rig, config: Path, tmp_path: Path) -> dict[str, Any]:
    dash = Dashboard(
        config_file=str(config),
        state=str(tmp_path / "state.sqlite"),
        now=rig.emu.clock.now,
        client_for=lambda ref: rig.client,
        aws=AwsClients(rig.emu.endpoint),
    )
    answer = TestClient(create_app(dash, allowed_hosts=["testserver"])).get(f"/api/clusters/{NAME}")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _plan(config: Path, monkeypatch: pytest.MonkeyPatch, rig: Rig) -> dict[str, Any]:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", rig.emu.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "t")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "t")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    out = CliRunner().invoke(cli_app, ["plan", "--json", "--config", str(config)])
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.output)["clusters"]
    assert isinstance(row, dict)
    return row


def _by_group(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["group"]: g for g in body["groups"]}


def test_the_cluster_page_names_the_next_mornings_change_as_plan_does(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.emu.backend.release_image("1.3.0", security_update=True)  # DescribeCluster: SecurityUpdateRequired
    config = _config(tmp_path)
    body = _page(rig, config, tmp_path)
    groups = _by_group(body)
    assert groups["gpu"]["image_next"] == ["AMI 1.2.1 → 1.3.0, security update"]
    assert groups["cpu"]["image_next"] == [] and groups["cpu"]["release"] == "1.2.1"  # pinned: stays
    assert groups["own"]["release"] is None and groups["own"]["image_next"] == []  # a custom AMI
    row = _plan(config, monkeypatch, rig)
    # One truth: the page and `plan` read the same forecast.
    assert body["images"]["image_updates"] == row["image_updates"]
    assert any(line in row["warnings"] for line in body["images"]["lines"])


def test_a_change_awaiting_approval_is_shown_as_awaiting_not_as_made(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.emu.backend.release_image("1.3.0", security_update=True)
    config = _config(tmp_path, approve_image=True)
    body = _page(rig, config, tmp_path)
    assert body["images"]["image_updates"] == []  # nobody approved: the morning keeps it pinned
    awaiting = {u["group"]: u["to_release"] for u in body["images"]["image_awaiting_approval"]}
    assert awaiting.get("gpu") == "1.3.0" and "cpu" not in awaiting and "own" not in awaiting
    assert "awaiting approval" in _by_group(body)["gpu"]["image_next"][0]
    assert _plan(config, monkeypatch, rig)["image_awaiting_approval"] == body["images"]["image_awaiting_approval"]


def test_a_refused_release_is_shown_with_the_way_back(rig: Rig, tmp_path: Path) -> None:
    rig.emu.backend.release_image("1.3.0", security_update=True)
    config = _config(tmp_path)
    store = open_store(str(tmp_path / "state.sqlite"))
    key = _page(rig, config, tmp_path)["key"]  # the key the dashboard reads the cluster's record under
    assert store.get(key) is None
    # The record a failed first morning on 1.3.0 leaves behind (rolled back to 1.2.1 since).
    refused = ImageState(refused={"gpu": ["1.3.0"]}, good={"gpu": "1.2.1"})
    store.put(ClusterRecord.new(key, rig.emu.clock.now()).evolve(images=refused), expected_version=None)
    body = _page(rig, config, tmp_path)
    (said,) = _by_group(body)["gpu"]["image_next"]
    assert "AMI 1.3.0 refused after a first morning failed on it" in said
    assert f"hyperpod-scheduler allow-image {NAME} gpu" in said
    assert body["images"]["image_refused"] == {"gpu": ["1.3.0"]}
    assert "gpu" not in {u["group"] for u in body["images"]["image_updates"]}  # refused: not taken again
