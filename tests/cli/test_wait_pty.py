"""`start --wait` in a real terminal: a pseudo-terminal 100 columns wide, the emulator served on a free
port, the CLI as its own process (so Rich sees a terminal and draws its live table). The cluster is
made and stopped beforehand in this process (the emulator served from it, the CLI run in process): the
child on the terminal is the subject, not the set-up, which was four child processes and 13 s. Each group is one
row with its name, counts and phase in words; no Python dict, no cut column title, and an ordinary
start never says "waiting for capacity" (a node not launched yet is no capacity wait)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperpod_scheduler.emulator import running_emulator
from tests.reliability.cli_inproc import completed

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from hyperpod_scheduler.cli.main import main; main()"]


def _in_pty(args: list[str], env: dict[str, str], columns: int, within_s: float) -> tuple[int, str]:
    """Run ``args`` with a pty of ``columns`` as its terminal; its exit code and everything it drew."""
    import fcntl
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(args, stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    if proc.poll() is None:
        proc.kill()
    code = proc.wait()
    os.close(leader)
    return code, b"".join(chunks).decode(errors="replace")


def _plain(drawn: str) -> str:
    # Each redraw moves the cursor back up: every control sequence ends a line as the eye sees it.
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", drawn).replace("\r", "")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, str]]:
    with running_emulator(speed=600, in_process=True) as emu:  # `emulator serve --speed 600`'s emulator
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT / "src"),
            "AWS_ENDPOINT_URL": emu.endpoint,
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "x",
            "AWS_DEFAULT_REGION": "us-east-1",
            "HYPERPOD_SCHEDULER_CONFIG": str(tmp_path / "tour.yaml"),
        }
        env.pop("COLUMNS", None)
        env.pop("NO_COLOR", None)
        config = (ROOT / "examples" / "tour.yaml").read_text().replace("state: .tour/", f"state: {tmp_path}/")
        (tmp_path / "tour.yaml").write_text(config)
        for cmd in (["cluster", "create", str(ROOT / "examples/g5-dev-extension.yaml")], ["stop", "g5-dev", "--wait"]):
            done = completed(cmd, env)
            assert done.returncode == 0, (cmd, done.stdout, done.stderr)
        yield env


def test_start_wait_in_a_100_column_pty_shows_one_row_per_group_with_its_phase_in_words(
    served: dict[str, str],
) -> None:
    code, drawn = _in_pty([*CLI, "start", "g5-dev", "--wait"], served, columns=100, within_s=300)
    text = _plain(drawn)
    assert code == 0, text
    assert "{'" not in text and "'group':" not in text, text  # no Python dict in the phase column
    assert "curre…" not in text and "group" in text and "phase" in text, text
    assert "waiting for capacity" not in text, text
    rows = [line for line in text.splitlines() if re.match(r"\s*(controller|workers|[a-z0-9-]+)\s+\d+ / \d+", line)]
    groups = {line.split()[0] for line in rows}
    assert len(groups) >= 2, text  # one row per group, each with its own name
    assert any(re.search(r"\d+ of \d+ up|not launched yet|lifecycle setup|ready", line) for line in rows), text
    assert all(len(line) <= 100 for line in text.splitlines()), text
