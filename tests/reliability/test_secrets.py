"""No credential, token or webhook URL reaches the output or the state store; the state file is 0600."""

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
    "SLACK_WEBHOOK_URL": "http://127.0.0.1:9/services/T111FAKE/B111FAKE/otherWebhookSecret43",
}
CONFIG_WEBHOOK = "http://127.0.0.1:9/services/T222FAKE/B222FAKE/configWebhookSecret44"
NEEDLES = [
    *SECRETS.values(),
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
        f"notifications: {{webhook_url: '{CONFIG_WEBHOOK}'}}\n"
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
