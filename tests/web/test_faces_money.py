"""Issue 27 item 4: money per night and per month is one figure on every face (cost.rates.money):
`report` and the Savings page whatever range each picked, `status` and the Fleet page's "tonight"."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app as cli_app
from hyperpod_scheduler.web import create_app
from tests.web.conftest import TOKEN
from tests.web.fleet import DemoFleet, demo_fleet


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoFleet]:
    # Past 21:00 PST on Monday: p5-training's night has begun and its stop kept every group.
    with demo_fleet(Path(tmp_path_factory.mktemp("money")), hours=42.0) as f:
        yield f


def _client(fleet: DemoFleet) -> TestClient:
    return TestClient(create_app(fleet.dashboard(TOKEN), allowed_hosts=["testserver"]))


def _cli_json(fleet: DemoFleet, *argv: str) -> Any:
    result = CliRunner().invoke(cli_app, [*argv, "--json", "--config", str(fleet.config), "--state", str(fleet.state)])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.fixture
def emulator_env(night: DemoFleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The CLI finds FSx through the emulator, as the dashboard does.
    for var, value in (
        ("AWS_ENDPOINT_URL", night.emu.endpoint),
        ("AWS_ACCESS_KEY_ID", "t"),
        ("AWS_SECRET_ACCESS_KEY", "t"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("XDG_CONFIG_HOME", str(tmp_path)),
    ):
        monkeypatch.setenv(var, value)


@pytest.mark.usefixtures("emulator_env")
def test_report_and_the_savings_page_give_one_month_whatever_range_each_picked(night: DemoFleet) -> None:
    """Per month was the window times 730 / window hours: the Savings page's 30 days and `report`'s
    two days over the same nights gave months a factor of 15 apart."""
    now = night.emu.clock.now()
    until = now.isoformat()
    cli = _cli_json(night, "report", "--since", (now - timedelta(days=2)).isoformat(), "--until", until)
    api = _client(night).get("/api/savings", params={"since": (now - timedelta(days=30)).isoformat(), "until": until})
    assert api.status_code == 200, api.text
    from_api = {c["cluster"]: c for c in api.json()["clusters"]}
    from_cli = {c["cluster"]: c for c in cli["clusters"]}
    assert set(from_cli) == set(from_api) and from_cli
    for name, c in from_cli.items():
        for key in ("window", "per_night", "per_month", "fsx_per_month", "per_month_from"):
            assert from_api[name][key] == c[key], (name, key)
        assert c["per_month_from"] == "schedule", name  # every demo cluster is on a schedule
    assert cli["total"]["per_month"] == api.json()["total"]["per_month"]
    assert cli["total"]["per_month"]["saving"] > 0


def test_status_and_the_fleet_page_give_one_cost_per_night_for_what_is_kept(night: DemoFleet) -> None:
    """`status` priced kept groups over the schedule's next whole night; the Fleet page's "tonight" over
    what was left of the night in progress: two figures for one night."""
    at = night.emu.clock.now().isoformat()
    status = {r["cluster"]: r for r in _cli_json(night, "status", "--at", at)}
    fleet = {r["cluster"]: r for r in _client(night).get("/api/fleet").json()}
    row, tonight = status["p5-training"], fleet["p5-training"]["tonight"]
    kept = [p["keep_cost_per_night_usd"] for p in row["protected"]]
    assert kept and all(k is not None for k in kept), row["protected"]
    assert tonight["bills"] and tonight["usd"] is not None, tonight
    assert sum(kept) == pytest.approx(tonight["usd"], abs=0.05 * len(kept))
