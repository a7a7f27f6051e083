"""Issue 28 item 15: a stdout that is closed (`>&-`) or full (/dev/full) is one line on stderr and exit 2,
never a traceback, exit 70 or the interpreter's own 'Exception ignored' at exit (exit 120).

These need a real process (the stream is the process's own), so they are few; writing to /dev/full
changes nothing on the machine, it only fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "hyperpod_scheduler.cli.main"]
ENV = {**os.environ, "HYPERPOD_SCHEDULER_DEBUG": ""}


def _child(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *argv], stderr=subprocess.PIPE, text=True, timeout=120, env=ENV, **kw)  # type: ignore[call-overload, no-any-return]


@pytest.mark.parametrize("argv", [["cluster", "example"], ["schedule", "next", "always", "--count", "3"]])
def test_a_closed_stdout_is_one_line_and_exit_2(argv: list[str]) -> None:
    child = _child(argv, stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1))
    assert child.returncode == 2, child.stderr
    assert child.stderr.startswith("error: stdout is closed") and child.stderr.count("\n") == 1, child.stderr


@pytest.mark.parametrize("argv", [["cluster", "example"], ["--help"], ["schedule", "next", "always", "--count", "3"]])
def test_a_full_stdout_is_one_line_and_exit_2(argv: list[str]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this machine")
    with open("/dev/full", "w") as full:
        child = _child(argv, stdout=full)
    assert child.returncode == 2, child.stderr
    assert child.stderr == "error: stdout: cannot write: No space left on device; the output is incomplete\n"
