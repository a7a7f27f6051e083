"""`hyperpod-scheduler emulator serve` as a real process: endpoint line, signals, state across restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.emulator.clients import make_client
from tests.emulator.emu_requests import create_request

SERVE = [sys.executable, "-m", "hyperpod_scheduler.cli.main", "emulator", "serve"]


@contextmanager
def serving(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen([*SERVE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("endpoint: http://127.0.0.1:"), (line, proc.stderr and proc.stderr.read())
        yield proc, line.removeprefix("endpoint: ").strip()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("AWS_ENDPOINT_URL", None)
    env.pop("AWS_ENDPOINT_URL_SAGEMAKER", None)
    return env


def _stop(proc: subprocess.Popen[str], sig: signal.Signals) -> tuple[int, str, str]:
    """Send ``sig``; the exit code and what the process wrote after its endpoint line."""
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=20)
    return proc.returncode, out, err


def test_state_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "emulator.sqlite"
    with serving("--state", str(state), "--speed", "600") as (proc, endpoint):
        sm = make_client(endpoint)
        arn = sm.create_cluster(**create_request("kept", tags={"schedule": "nights"}))["ClusterArn"]
        code, out, err = _stop(proc, signal.SIGTERM)
        assert code == 0, err
        assert out == ""  # exactly one line on stdout

    with serving("--state", str(state), "--speed", "600") as (proc, endpoint):
        sm = make_client(endpoint)
        described = sm.describe_cluster(ClusterName="kept")
        assert described["ClusterArn"] == arn
        assert [g["InstanceGroupName"] for g in described["InstanceGroups"]] == ["controller", "gpu"]
        assert sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "schedule", "Value": "nights"}]
        code, _, err = _stop(proc, signal.SIGINT)
        assert code == 0, err


def test_fault_options_reach_the_server() -> None:
    with serving("--throttle-rate", "1", "--seed", "5") as (proc, endpoint):
        sm = make_client(endpoint)
        try:
            sm.list_clusters()
        except sm.exceptions.ClientError as exc:
            assert exc.response["Error"]["Code"] == "ThrottlingException"
        else:
            raise AssertionError("a throttle rate of 1 let a call through")
        assert _stop(proc, signal.SIGTERM)[0] == 0


def test_non_loopback_hosts_are_refused_without_allow_remote() -> None:
    done = subprocess.run([*SERVE, "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60, env=_env())
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]  # one line, no traceback
    assert "--allow-remote" in done.stderr


def test_bad_option_values_are_one_line_errors(tmp_path: Path) -> None:
    for args, needle in (
        (["--speed", "0"], "--speed"),
        (["--error-rate", "2"], "error_rate"),
        (["--capacity", str(tmp_path / "missing.yaml")], "--capacity"),
        (["--slurm", "c1gpu=node1"], "expected CLUSTER/GROUP=NODE"),
        (["--omitted-members", "forget"], "--omitted-members must be keep or reset"),
        (["--slurm", "c1/gpu=node1", "--slurm", "c2/cpu=node1"], "node node1 already backs c1/gpu"),
    ):
        done = subprocess.run([*SERVE, *args], capture_output=True, text=True, timeout=60, env=_env())
        assert done.returncode == 2, (args, done.stderr)
        assert needle in done.stderr and "Traceback" not in done.stderr
