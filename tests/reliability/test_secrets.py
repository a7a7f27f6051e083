"""No credential, token or webhook URL reaches the output or the state store; the state file is 0600.

Two halves: a normal night (stop, a failing stop, start, status, history, a tick with a missing config)
with secrets in the environment and the config; and every error path a secret could be quoted on (a
misspelt or unsafe webhook key, a secret in the wrong field, a state URL with a password, an unsafe
webhook in the environment, dashboard requests carrying secrets), each scanned for the planted values.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.engine.conftest import three_tier_request
from tests.reliability.harness import CLI, SIZES, at_sizes, cli_env, wait_for

SECRETS = {
    "AWS_ACCESS_KEY_ID": "AKIAFAKEKEY0123456789",
    "AWS_SECRET_ACCESS_KEY": "fake/Secret+Key0123456789abcdefghijklmnop",
    "AWS_SESSION_TOKEN": "FwoGZXIvYXdzEFAKESESSIONTOKEN0123456789",
    # Loopback, discard port: a notification attempt must never leave this machine.
    "HYPERPOD_SCHEDULER_WEBHOOK_URL": "http://127.0.0.1:9/services/T000FAKE/B000FAKE/fakeWebhookSecret42",
    "HYPERPOD_SCHEDULER_WEBHOOK_ALLOW_LOOPBACK": "1",
    "SLACK_WEBHOOK_URL": "http://127.0.0.1:9/services/T111FAKE/B111FAKE/otherWebhookSecret43",
}
CONFIG_WEBHOOK = "http://127.0.0.1:9/services/T222FAKE/B222FAKE/configWebhookSecret44"
NEEDLES = [
    *(v for k, v in SECRETS.items() if k != "HYPERPOD_SCHEDULER_WEBHOOK_ALLOW_LOOPBACK"),
    CONFIG_WEBHOOK,
    "fakeWebhookSecret42",
    "otherWebhookSecret43",
    "configWebhookSecret44",
    "FAKESESSIONTOKEN",
]


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with running_emulator(speed=3000, seed=13) as e:
        e.backend.dispatch("CreateCluster", three_tier_request("c1"))
        wait_for(lambda: at_sizes(e, "c1", SIZES), "c1 in service")
        yield e


def _run(emu: Emulator, tmp: Path, *args: str) -> str:
    env = cli_env(emu, tmp, **SECRETS)
    child = subprocess.run(
        [*CLI, *args, "--state", str(tmp / "state" / "s.db")],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.umask(0),  # a careless umask must not open the state file to others
    )
    return child.stdout + child.stderr


def test_no_secret_in_output_or_state_and_state_is_private(emu: Emulator, tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    config = tmp_path / "hyperpod-scheduler.yaml"
    config.write_text(
        "defaults: {poll_seconds: 0.05}\ntargets: [{region: us-east-1, schedule: never, clusters: [c1]}]\n"
        f"notifications: {{webhook_url: '{CONFIG_WEBHOOK}', webhook_allow_loopback: true}}\n"
    )
    cfg = ("--config", str(config))
    out = ""
    out += _run(emu, tmp_path, "stop", "c1", "--wait", *cfg)
    out += _run(emu, tmp_path, "stop", "no-such-cluster", *cfg)  # an AWS error on the way out
    out += _run(emu, tmp_path, "start", "c1", "--wait", "--json", *cfg)
    out += _run(emu, tmp_path, "status", "--json", *cfg)
    out += _run(emu, tmp_path, "history", "c1", "--json", *cfg)
    out += _run(emu, tmp_path, "tick", "--config", str(tmp_path / "missing.yaml"))
    assert "settled" in out and "no-such-cluster" in out  # the commands really ran
    files = sorted((tmp_path / "state").iterdir())
    assert files, "no state written"
    for needle in NEEDLES:
        assert needle not in out, f"{needle[:12]}... printed"
        for f in files:
            assert needle.encode() not in f.read_bytes(), f"{needle[:12]}... stored in {f.name}"
    mode = stat.S_IMODE((tmp_path / "state" / "s.db").stat().st_mode)
    assert mode == 0o600, oct(mode)
    for f in files:  # SQLite's -wal/-shm files too, when present
        assert stat.S_IMODE(f.stat().st_mode) & 0o077 == 0, f"{f.name} is {oct(stat.S_IMODE(f.stat().st_mode))}"


# ---- every error path that could quote a secret -----------------------------------------------------

PLANTED = "plantedSecret9c1e77"
URL_PASSWORD = "urlPassword5d2f88"
BAD_CONFIGS = [
    f"notifications: {{webhook: 'https://hooks.slack.com/services/T0/B0/{PLANTED}'}}\n",  # misspelt key
    f"notifications: {{webhook_url: 'http://169.254.169.254/latest/{PLANTED}'}}\n",  # unsafe URL
    f"notifications: {{webhook_url: 'ftp://hooks.example.com/{PLANTED}'}}\n",
    f"notifications: {{webhook_url: 'https://user:{URL_PASSWORD}@hooks.example.com/{PLANTED}'}}\n",
    f"notifications: {{webhook_url: 12, sns_topic_arn: 'https://x:{URL_PASSWORD}@h/{PLANTED}'}}\n",
    f"api_token: {PLANTED}\n",  # an unknown key: its value may be anything
    f"defaults: {{poll_seconds: 'https://u:{URL_PASSWORD}@h/{PLANTED}'}}\n",  # a URL in the wrong field
    f"defaults: {{poll_seconds: 'AKIA{PLANTED}0123'}}\n",  # a token in the wrong field
    f"targets: [{{region: us-east-1, profile: 7, clusters: [{{name: c1, token: {PLANTED}}}]}}]\n",
    f"state: 'https://admin:{URL_PASSWORD}@db.example.com/state'\n",  # a store URL with a password
    f"schedules: {{office: 'https://u:{URL_PASSWORD}@calendar.example.com/{PLANTED[:4]}'}}\n",
]


@pytest.mark.parametrize("config", BAD_CONFIGS, ids=range(len(BAD_CONFIGS)))
@pytest.mark.parametrize("command", [("tick",), ("status",), ("plan", "--no-describe"), ("report",)])
def test_no_error_path_quotes_a_secret(tmp_path: Path, config: str, command: tuple[str, ...]) -> None:
    from tests.reliability.cli_inproc import cli

    path = tmp_path / "c.yaml"
    path.write_text(config)
    state = () if config.startswith("state:") else ("--state", "memory:")
    ran = cli(*command, "--config", str(path), *state, env={"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"})
    shown = ran.out + ran.err
    assert ran.code in ((1, 2) if command[0] in ("tick", "status") else (0, 1, 2)), shown  # tick refuses each
    assert PLANTED not in shown and URL_PASSWORD not in shown, shown


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (("status", "--state", f"https://admin:{URL_PASSWORD}@db.example.com/x"), {}),
        (("status", "--state", "memory:"), {"HYPERPOD_SCHEDULER_WEBHOOK_URL": f"http://10.0.0.1/{PLANTED}"}),
        (("stop", "c1", "--state", "memory:"), {"HYPERPOD_SCHEDULER_WEBHOOK_URL": f"https://10.0.0.1/{PLANTED}"}),
        (("schedule", "check", f"https://u:{URL_PASSWORD}@h/x"), {}),
    ],
)
def test_arguments_and_environment_with_secrets_are_refused_without_them(
    args: tuple[str, ...], env: dict[str, str]
) -> None:
    from tests.reliability.cli_inproc import cli

    ran = cli(*args, env=env)
    shown = ran.out + ran.err
    assert ran.code == 2 and PLANTED not in shown and URL_PASSWORD not in shown, shown


def test_dashboard_errors_never_echo_what_was_sent() -> None:
    from fastapi.testclient import TestClient

    from hyperpod_scheduler.web import Dashboard, create_app

    token = "dashboard-token-" + PLANTED
    client = TestClient(create_app(Dashboard(token=token), allowed_hosts=["testserver"]), raise_server_exceptions=False)
    auth = {"Authorization": f"Bearer {token}"}
    answers = [
        client.get(f"/api/clusters/{PLANTED}"),
        client.get(f"/api/schedules?tz={PLANTED}"),
        client.get(f"/api/savings?until={PLANTED}"),
        client.post("/api/clusters/c1/hold", headers=auth, json={"until": PLANTED, "state": PLANTED}),
        client.post("/api/clusters/c1/stop", headers={"Authorization": f"Bearer wrong-{PLANTED}"}, json={}),
        client.put("/api/schedules/office", headers=auth, json={"grid": PLANTED}),
        client.post("/clusters/c1/actions/stop", data={"token": f"wrong-{PLANTED}", "reason": PLANTED}),
        client.get(f"/clusters/{PLANTED}/actions/{PLANTED}"),
    ]
    for answer in answers:
        assert 400 <= answer.status_code < 500 and answer.status_code != 421, answer.text  # reached the routes
        assert PLANTED not in answer.text, answer.text
