"""Piped with COLUMNS=80 (issue 27 items 9 and 10): piped output is not wrapped at all (one row, one
line, for grep and awk), so no cell is broken inside a word ("p5-train ing"), and no instant is given
twice ("(Mon 06:00 UTC) (Mon 06:00 UTC)"). This drives the commands a person pipes, against the emulator."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.emulator import running_emulator
from tests.engine.conftest import three_tier_request
from tests.sessions import shared_session

NAME = "p5-training-cluster"
runner = CliRunner()


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    with running_emulator(speed=3000, seed=5, in_process=True) as emu:
        for key, value in {
            "AWS_ENDPOINT_URL_SAGEMAKER": emu.endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
            "COLUMNS": "80",
        }.items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(tmp_path)
        (tmp_path / "hyperpod-scheduler.yaml").write_text(
            "defaults: {poll_seconds: 0.05, schedule: office}\n"
            "schedules: {office: {windows: ['Mon-Fri 08:00-18:00'], timezone: UTC}}\n"
            f"targets: [{{region: us-east-1, clusters: [{NAME}]}}]\n"
        )
        client = shared_session().client("sagemaker", endpoint_url=emu.endpoint)
        client.create_cluster(**three_tier_request(NAME))
        for _ in range(400):
            if client.describe_cluster(ClusterName=NAME)["ClusterStatus"] == "InService":
                break
            time.sleep(0.05)
        yield tmp_path


@pytest.mark.parametrize(
    "args",
    [
        ["status"],
        ["status", "-o", "wide"],
        ["plan", "--until", "2026-12-03T00:00:00Z"],
        ["stop", NAME, "--wait"],
        ["status"],
        ["history", NAME],
        ["report"],
    ],
    ids=["status", "status-wide", "plan", "stop", "status-after-stop", "history", "report"],
)
def test_80_columns_piped_break_no_word_and_give_no_instant_twice(live: Path, args: list[str]) -> None:
    if args[0] != "stop":
        assert runner.invoke(app, ["stop", NAME, "--wait"]).exit_code == 0  # something to show
    result = runner.invoke(app, args)
    out = result.output
    assert result.exit_code in (0, 3), out
    rows = [line for line in out.splitlines() if NAME[:8] in line]
    assert rows and all(NAME in line for line in rows), out  # every mention whole, on its own line
    doubled = re.search(r"(\([^()]*\d\d:\d\d[^()]*\))\s*\1", out)
    assert doubled is None, out
