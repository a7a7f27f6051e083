"""The demo, the quick tour's commands and the dashboard, with every connection off loopback refused:
nothing they run may even try to leave the machine (the guard records attempts a client swallows too)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("scenario", ["demo", "tour"])
def test_nothing_leaves_loopback(scenario: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        HOME=str(tmp_path),  # no price cache or override file of the user's
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        AWS_CONFIG_FILE=str(tmp_path / "aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "aws-credentials"),
        PYTHONPATH=str(ROOT),
        COLUMNS="160",
    )
    run = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "cost" / "loopback_run.py"), scenario, str(tmp_path)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert "no connection left loopback" in run.stderr
