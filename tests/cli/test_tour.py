"""The README's tour, run as written: its bash block is taken from README.md and run by bash in a fresh
folder laid out like a clone (scripts/, examples/, pyproject.toml, and .venv being this test run's own
environment, so `bash scripts/install.sh` finds it installed). Only the two port numbers are swapped
for free ones (other sessions may hold 8765 and 8080). Every command must succeed; the dashboard it
ends with must serve the tour's cluster; Ctrl-C ends it and the block goes on to stop the emulator."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.served import first_page, url_in_output

ROOT = Path(__file__).resolve().parents[2]


def tour_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## A quick tour", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```bash\n(.*?)```", section, re.S)
    assert match, "README.md: the tour has no ```bash block"
    return match.group(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _child(parent: int, word: str) -> int:
    """The pid of ``parent``'s child whose command line holds ``word``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and word in cmdline:
            return int(stat.parent.name)
    raise AssertionError(f"no child of {parent} runs {word!r}")


def _clone(tmp: Path) -> Path:
    folder = tmp / "clone"
    folder.mkdir()
    shutil.copytree(ROOT / "scripts", folder / "scripts")
    shutil.copy(ROOT / "pyproject.toml", folder / "pyproject.toml")
    (folder / "examples").symlink_to(ROOT / "examples")
    (folder / ".venv").symlink_to(Path(sys.prefix))
    return folder


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    block = tour_block()
    assert "8765" in block and "8080" in block
    emulator_port, dashboard_port = _free_port(), _free_port()
    script = block.replace("8765", str(emulator_port)).replace("8080", str(dashboard_port))
    folder = _clone(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HYPERPOD_SCHEDULER_"))}
    env.update(HOME=str(tmp_path), COLUMNS="160", PATH=os.environ.get("PATH", "/usr/bin:/bin"))
    # -e: the first failing command ends the run (a person pasting it would see that line fail).
    proc = subprocess.Popen(
        ["bash", "-e", "-c", script],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    seen: list[str] = []
    try:
        url = url_in_output(proc, r"dashboard on (http://127\.0\.0\.1:\d+/)", 300, seen)
        output = "".join(seen)
        assert url, f"the tour stopped before its dashboard:\n{output[-4000:]}"
        page = first_page(url, tries=100, pause_s=0.1)
        assert "g5-dev" in page
        # Ctrl-C, as a person ends the dashboard: at a terminal it reaches the foreground command only,
        # and the emulator (a background job) is left for the block's last line.
        os.kill(_child(proc.pid, "dashboard"), signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        output += rest
    finally:
        # Whatever the block left running (an emulator, if it ended before its last line) goes too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 0, output[-4000:]
    # What the tour promises along the way:
    assert "valid" in output and "creating cluster 'g5-dev'" in output
    assert "stop settled" in output and "start settled" in output  # --wait waited out Creating
    assert "g5-dev" in output and "berlin-office" in output  # status shows the tour config's cluster
    assert "error:" not in output, output[-4000:]
    assert (folder / ".tour" / "state.sqlite").exists()  # the tour's state stayed in the checkout
