"""Issue 19's examples, one regression test each: a file, an argument or a request that used to end in
``error: internal error`` (exit 70), a hang, a wrong answer or an exhausted machine now gets one line
naming the field or argument, exit 2 (bad input) or 1 (refused or failed), and nothing else happens.

AWS answers, deadlines, webhooks, the dashboard and the state file have their own modules
(tests/aws/test_answers.py, tests/aws/test_deadlines.py, tests/notify/test_webhooks.py,
tests/web/test_edge.py, tests/store/test_store_bounds.py); this one is files and arguments.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hyperpod_scheduler.aws.clients import sagemaker_client
from hyperpod_scheduler.emulator import running_emulator
from tests.engine.conftest import three_tier_request
from tests.inputs.test_bounded import billion_laughs
from tests.reliability.cli_inproc import cli

CLI = [sys.executable, "-m", "hyperpod_scheduler.cli.main"]
GOOD_SPEC = """\
name: c1
defaults: {execution_role: "arn:aws:iam::123456789012:role/x", instance_type: ml.c5.xlarge, lifecycle: ami}
instance_groups:
  - {name: controller, count: 1, slurm: {node_type: Controller}}
  - {name: workers, count: 2, slurm: {node_type: Compute, partition: w}}
"""


def _write(tmp: Path, name: str, data: str | bytes) -> str:
    path = tmp / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(path)


# ---- config files -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"targets: [\xff\xfe]\n", "line 1, column 11: not UTF-8 text (byte 0xff)"),
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 64 levels deep"),
        ("defaults: {settle_timeout_minutes: 1e308}\n", "defaults.settle_timeout_minutes: Input should be less"),
        ("defaults: {settle_timeout_minutes: 1.0e+308}\n", "defaults.settle_timeout_minutes: Input should be less"),
        ("defaults: {poll_seconds: .nan}\n", "defaults.poll_seconds: Input should be a finite number"),
        ("defaults: {lease_ttl_seconds: .inf}\n", "defaults.lease_ttl_seconds: Input should be a finite number"),
        ("defaults: {retry: {backoff_minutes: [1e300]}}\n", "defaults.retry.backoff_minutes[0]"),
        ("a: &a [*a]\n", "a recursive alias"),
        (billion_laughs(), "more than 250,000 values once aliases are expanded"),
        ('state: "a\\0b"\n', "contains a control character"),
        ('targets: [{clusters: ["a/b"]}]\n', "targets[0].clusters[0].name"),
    ],
)
def test_a_bad_config_is_one_line_and_exit_2(tmp_path: Path, data: str | bytes, said: str) -> None:
    config = _write(tmp_path, "c.yaml", data)
    state = () if "state:" in str(data) else ("--state", "memory:")
    line = cli("tick", "--config", config, *state).one_error_line()
    assert said in line
    assert cli("status", "--config", config, *state).code == 2


# ---- cluster specs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "said"),
    [
        ("key.yaml", "name: c1\n? [a, b]\n: 1\ninstance_groups: []\n", "a mapping key must be a plain value"),
        ("float.yaml", "name: c1\ninstance_groups: [1.5]\n", "instance_groups[0]"),
        ("raw.json", '{"ClusterName": "c1", "InstanceGroups": [1.5]}', "InstanceGroups[0]"),
        ("deep.yaml", "name: " + "[" * 3000 + "]" * 3000, "nested more than 64 levels deep"),
        ("utf.yaml", b"name: c\xffx\n", "not UTF-8 text"),
    ],
)
@pytest.mark.parametrize("command", ["validate", "render"])
def test_a_bad_spec_is_one_line_and_exit_2(
    tmp_path: Path, name: str, data: str | bytes, said: str, command: str
) -> None:
    ran = cli("cluster", command, _write(tmp_path, name, data))
    if command == "render" or "yaml" in name:
        assert said in ran.one_error_line()
        return
    # `validate` lists every problem of a spec it could read: one line each, then its verdict.
    assert ran.code == 2 and ran.error_lines and all(line.startswith("error: ") for line in ran.error_lines)
    assert any(said in line for line in ran.error_lines) and "internal error" not in ran.err
    assert "invalid: cluster 'c1'" in ran.out


@pytest.mark.parametrize("command", ["validate", "render"])
def test_an_alias_bomb_spec_is_refused_in_bounded_memory_and_time(tmp_path: Path, command: str) -> None:
    """The 17.8 GB case. The child gets 1 GiB of address space, so a regression fails here with a
    MemoryError instead of taking the machine down with it."""
    bomb = _write(tmp_path, "bomb.yaml", billion_laughs())
    assert os.path.getsize(bomb) < 500

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    started = time.monotonic()
    child = subprocess.run(
        [*CLI, "cluster", command, bomb], capture_output=True, text=True, timeout=120, preexec_fn=limit
    )
    assert child.returncode == 2, child.stderr
    assert child.stderr.count("\n") == 1 and "more than 250,000 values once aliases are expanded" in child.stderr
    assert time.monotonic() - started < 60


def test_a_good_spec_still_renders(tmp_path: Path) -> None:
    ran = cli("cluster", "render", _write(tmp_path, "ok.yaml", GOOD_SPEC))
    assert ran.code == 0, ran.err
    assert json.loads(ran.out)["ClusterName"] == "c1"


# ---- arguments -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("report", "--until", "0001-01-01T00:00Z", "--state", "memory:"), "--until: '0001-01-01T00:00Z' is outside"),
        (("report", "--since", "9999-12-31T23:59+00:00", "--state", "memory:"), "--since: "),
        (("plan", "--until", "9999-12-31T23:00-05:00", "--state", "memory:"), "--until: "),
        (("tick", "--at", "yesterday", "--state", "memory:"), "--at: 'yesterday' is not an ISO 8601"),
        (("emulator", "serve", "--speed", "inf"), "--speed must be a positive finite number, got inf"),
        (("emulator", "serve", "--speed", "nan"), "--speed must be a positive finite number, got nan"),
        (("run", "--interval", "-1", "--state", "memory:"), "--interval: -1.0 is not a number of seconds"),
        (("run", "--interval", "nan", "--state", "memory:"), "--interval: nan is not a number of seconds"),
        (("run", "--interval", "inf", "--state", "memory:"), "--interval: inf is not a number of seconds"),
        (("run", "--interval", "soon", "--state", "memory:"), "Invalid value for '--interval'"),
        (("status", "--state", "s\x00.db"), "state store 's\\x00.db': contains a control character"),
        (("stop", "c1", "--state", "x\ny.db"), "contains a control character"),
        (("hold", "a" * 64, "--state", "memory:"), "is not a cluster name"),
        (("hold", "a/b", "--state", "memory:"), "CLUSTER: 'a/b' is not a cluster name"),
        (("release", "gr\u00fcn", "--state", "memory:"), "is not a cluster name"),
        (("history", "-x-", "--state", "memory:"), "No such option"),
        (("history", "c1_", "--state", "memory:"), "is not a cluster name"),
        (("cluster", "describe", "a b"), "is not a cluster name"),
        (("dashboard", "--host", "256.1.1.1", "--port", "0", "--state", "memory:"), "--host 256.1.1.1: not an IPv4"),
        (("nosuch",), "No such command 'nosuch'"),
        (("stop",), "Missing argument"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], said: str
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing may be created beside the caller's files on the way to the refusal
    ran = cli(*args)
    line = ran.one_error_line()
    assert ran.code == 2 and said in line, line
    assert list(tmp_path.iterdir()) == []


def test_names_outside_the_api_pattern_are_never_stored(tmp_path: Path) -> None:
    state = str(tmp_path / "s.db")
    for name in ("a" * 64, "a/b", "gr\u00fcn", "-lead", "trail-", "x\x1b[2Jy"):
        assert cli("hold", name, "--state", state).code == 2
    # A hold is kept under the cluster's account, which the first look at it tells.
    with running_emulator(in_process=True) as emu:
        env = {
            "AWS_ENDPOINT_URL_SAGEMAKER": emu.endpoint,
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
        }
        client = sagemaker_client(
            region="us-east-1", endpoint_url=emu.endpoint, aws_access_key_id="test", aws_secret_access_key="test"
        )
        client.create_cluster(**three_tier_request("ok-name-1"))
        assert cli("hold", "ok-name-1", "--state", state, env=env).code == 0
        listed = cli("status", "--json", "--state", state, env=env)
    assert [r["cluster"] for r in json.loads(listed.out)] == ["ok-name-1"]


def test_control_characters_from_input_never_reach_the_terminal(tmp_path: Path) -> None:
    spec = _write(tmp_path, "s.yaml", 'name: "c\\e[31mred\\rX"\ninstance_groups: [{name: "g\\x07", count: -1}]\n')
    ran = cli("cluster", "validate", spec)
    shown = ran.out + ran.err
    assert "\x1b" not in shown and "\r" not in shown and "\x07" not in shown
    assert "\\x1b[31mred\\rX" in shown


def test_emoji_codes_in_input_are_shown_as_written(tmp_path: Path) -> None:
    # Rich turns ":x:" into an emoji unless told not to: an error line must say what was given (or what
    # AWS said), character for character.
    ran = cli("schedule", "check", "Mon-Fri :x: 08:00")
    assert ran.code == 2
    assert "':x:'" in ran.one_error_line() and "\u274c" not in ran.err
