"""Issue 27: the CLI's status and the JSON API tell the same truth about each cluster, and that truth
is what the cluster is doing (not what its schedule last wanted)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app as cli_app
from hyperpod_scheduler.web import create_app
from tests.web.conftest import TOKEN
from tests.web.fleet import DemoFleet, demo_fleet


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoFleet]:
    # Past 21:00 PST on Monday: p5-training's schedule has asked for a stop, and every group is kept.
    with demo_fleet(Path(tmp_path_factory.mktemp("night")), hours=42.0) as f:
        yield f


def _api(fleet: DemoFleet) -> dict[str, dict[str, object]]:
    client = TestClient(create_app(fleet.dashboard(TOKEN), allowed_hosts=["testserver"]))
    return {r["cluster"]: r for r in client.get("/api/fleet").json()}


def _cli(fleet: DemoFleet) -> dict[str, dict[str, object]]:
    result = CliRunner().invoke(
        cli_app, ["status", "--json", "--config", str(fleet.config), "--state", str(fleet.state)]
    )
    assert result.exit_code == 0, result.output
    return {row["cluster"]: row for row in json.loads(result.output)}


def test_a_stop_that_kept_every_group_is_not_called_stopped(night: DemoFleet) -> None:
    api, cli = _api(night)["p5-training"], _cli(night)["p5-training"]
    for row in (api, cli):
        assert row["state"] == "running", row["state"]
        assert row["usd_per_hour"] and float(str(row["usd_per_hour"])) > 390  # 4 x P5 and the head bill
        assert any("sent nothing" in str(f["text"]) for f in row["flags"])  # type: ignore[attr-defined]


def test_cli_and_api_agree_on_state_billing_and_flags(night: DemoFleet) -> None:
    api, cli = _api(night), _cli(night)
    assert set(api) == set(cli)
    for name in api:
        for key in ("state", "state_text", "usd_per_hour", "billing", "flags", "recorded_sizes", "protected"):
            assert api[name][key] == cli[name][key], (name, key)
