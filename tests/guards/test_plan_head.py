"""`plan` says the Slurm head stays with the kept compute nodes, and what that costs a night."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.cost.prices import bundled
from hyperpod_scheduler.emulator import running_emulator
from tests.engine.conftest import START, settle
from tests.guards.test_capacity import _p5_request


@pytest.fixture
def p5(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    with running_emulator(virtual_start=START, seed=3, in_process=True) as emu:
        for var, value in (
            ("AWS_ENDPOINT_URL", emu.endpoint),
            ("AWS_ACCESS_KEY_ID", "t"),
            ("AWS_SECRET_ACCESS_KEY", "t"),
            ("AWS_DEFAULT_REGION", "us-east-1"),
            ("XDG_CONFIG_HOME", str(tmp_path)),
        ):
            monkeypatch.setenv(var, value)
        client = boto3.client("sagemaker", endpoint_url=emu.endpoint)
        client.create_cluster(**_p5_request())
        settle(emu, client, "p5c")
        yield tmp_path


def _plan(folder: Path, policy: str) -> dict[str, object]:
    config = folder / "c.yaml"
    config.write_text(
        f"schedules: {{office: 'Mon-Fri 08:00-18:00 UTC'}}\n"
        f"targets: [{{region: us-east-1, clusters: [{{name: p5c, schedule: office{policy}}}]}}]\n"
    )
    result = CliRunner().invoke(app, ["plan", "--json", "-c", str(config), "--state", str(folder / "s.db")])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["clusters"]
    assert isinstance(row, dict)
    return row


def test_plan_keeps_the_controller_with_the_p5_workers_and_prices_it(p5: Path) -> None:
    row = _plan(p5, "")
    kept = {p["group"]: p for p in row["protected"]}  # type: ignore[attr-defined]
    assert set(kept) == {"p5", "controller"}
    ctl = kept["controller"]
    assert "stays up with the compute group 'p5' kept overnight" in ctl["reason"]
    hours = row["night_hours"]
    assert ctl["keep_cost_per_night_usd"] == pytest.approx(bundled().instance("ml.m5.xlarge").usd * hours, abs=0.01)  # type: ignore[union-attr,operator]
    assert row["warnings"] == []  # the queue survives: nothing to warn about


def test_an_explicit_setting_still_zeroes_the_head_and_plan_warns(p5: Path) -> None:
    row = _plan(p5, ", policy: {keep_slurm_head: false}")
    assert [p["group"] for p in row["protected"]] == ["p5"]  # type: ignore[attr-defined]
    assert any("queue" in w for w in row["warnings"])  # type: ignore[attr-defined]
