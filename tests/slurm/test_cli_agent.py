"""`hyperpod-scheduler agent ...` through Typer's runner."""

from __future__ import annotations

import subprocess
from pathlib import Path

from typer.testing import CliRunner

from hyperpod_scheduler.agent.install import UNIT_NAME, install_script
from hyperpod_scheduler.cli.agent import app

runner = CliRunner()


def test_install_script_installs_a_systemd_unit_on_the_controller_only(tmp_path: Path) -> None:
    out = tmp_path / "install-agent.sh"
    result = runner.invoke(
        app,
        ["install-script", "--channel", "s3://sagemaker-ops/agent", "--cluster", "acct/us-west-2/c1", "-o", str(out)],
    )
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert text.startswith("#!/bin/bash") and out.stat().st_mode & 0o111
    assert "not the Slurm controller, nothing to install" in text
    assert f"systemctl enable --now {UNIT_NAME}" in text
    assert "agent run --channel $CHANNEL --cluster $CLUSTER" in text
    assert "CHANNEL=s3://sagemaker-ops/agent" in text and "CLUSTER=acct/us-west-2/c1" in text


def test_install_script_refuses_values_a_unit_file_cannot_carry() -> None:
    result = runner.invoke(app, ["install-script", "--channel", "s3://b/p; rm -rf /", "--cluster", "c"])
    assert result.exit_code != 0
    assert "--channel" in str(result.exception)


def test_run_once_on_an_empty_channel_answers_nothing(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "--channel", f"sqlite:///{tmp_path}/c.sqlite", "--once"])
    assert result.exit_code == 0 and result.stdout == ""


def test_audit_needs_nodes_to_look_at() -> None:
    result = runner.invoke(app, ["audit"])
    assert result.exit_code != 0 and "--partition or --nodes" in str(result.exception)


def test_audit_reports_a_bad_settings_file_in_one_line(tmp_path: Path) -> None:
    settings = tmp_path / "s.yaml"
    settings.write_text("checkpoints:\n  policy: sometimes\n")
    result = runner.invoke(app, ["audit", "--partition", "gpu", "--settings", str(settings)])
    assert result.exit_code != 0
    assert "policy" in str(result.exception) and "sometimes" in str(result.exception)


def _fake_bin(folder: Path, log: Path, controller: bool) -> Path:
    """Stand-ins for systemctl, pgrep and python3 that log their arguments."""
    folder.mkdir()
    answer = 0 if controller else 1
    pip = f'#!/bin/sh\necho "pip $*" >>{log}\n'
    scripts = {
        "systemctl": f'echo "systemctl $*" >>{log}; case "$1" in is-enabled|is-active) exit {answer};; esac',
        "pgrep": "exit 1",
        # python3 -m venv DIR: make DIR/bin/pip, itself a logging stand-in.
        "python3": f'echo "python3 $*" >>{log}; mkdir -p "$3/bin"; printf \'{pip}\' >"$3/bin/pip"; chmod +x $3/bin/pip',
    }
    for name, body in scripts.items():
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)
    return folder


def _run_script(tmp_path: Path, controller: bool) -> tuple[subprocess.CompletedProcess[str], str, Path]:
    log = tmp_path / "calls.log"
    log.touch()
    fake = _fake_bin(tmp_path / "bin", log, controller)
    script = install_script("s3://sagemaker-ops/agent", "acct/us-west-2/c1", prefix=str(tmp_path / "opt"))
    env = {"PATH": f"{fake}:/usr/bin:/bin", "HYPERPOD_SCHEDULER_UNIT_DIR": str(tmp_path / "units")}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, check=False)
    return done, log.read_text(), tmp_path / "units" / UNIT_NAME


def test_the_install_script_does_nothing_on_a_node_without_slurmctld(tmp_path: Path) -> None:
    done, calls, unit = _run_script(tmp_path, controller=False)
    assert done.returncode == 0 and "not the Slurm controller" in done.stdout
    assert "python3" not in calls and not unit.exists()


def test_the_install_script_installs_and_enables_the_agent_on_the_controller(tmp_path: Path) -> None:
    done, calls, unit = _run_script(tmp_path, controller=True)
    assert done.returncode == 0, done.stderr
    assert f"python3 -m venv {tmp_path}/opt/venv" in calls
    assert "pip install --quiet --upgrade hyperpod-scheduler==" in calls
    assert f"systemctl enable --now {UNIT_NAME}" in calls
    exec_start = next(line for line in unit.read_text().splitlines() if line.startswith("ExecStart="))
    assert exec_start == (
        f"ExecStart={tmp_path}/opt/venv/bin/hyperpod-scheduler agent run "
        "--channel s3://sagemaker-ops/agent --cluster acct/us-west-2/c1 --poll 5"
    )
