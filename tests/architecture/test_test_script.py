"""scripts/test.sh's ``beside``/``finish_beside``: a stage run in the background beside the next one.

The two functions are taken from the script as written (its other stages install, lint and run the whole
suite) and run around two sleeps; the run is interrupted as Ctrl-C interrupts it (SIGINT to its whole
process group) or killed as a CI step's timeout kills it (SIGTERM to the script)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test.sh"
HARNESS = r"""
set +e
status=0
summary=()
eval "$(sed -n '/^stage() {/,/^}/p;/^record() {/,/^}/p;/^beside() {/,/^}/p;/^finish_beside() {/,/^}/p' "$1")"
beside "beside" sleep 30
stage "next" sleep 30
finish_beside
exit $status
"""


def _restore_signals() -> None:  # a child as a terminal starts it: SIGINT and SIGQUIT not ignored
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@pytest.mark.parametrize("how", ["ctrl-c", "killed"])
def test_an_interrupted_run_leaves_no_log_of_the_stage_beside_behind(tmp_path: Path, how: str) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    run = subprocess.Popen(
        ["bash", "-c", HARNESS, "harness", str(SCRIPT)],
        env={**os.environ, "TMPDIR": str(temp)},
        start_new_session=True,
        preexec_fn=_restore_signals,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not list(temp.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # both sleeps started
        if how == "ctrl-c":
            os.killpg(run.pid, signal.SIGINT)
        else:
            run.send_signal(signal.SIGTERM)
        run.wait(timeout=10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)  # whatever the script left running
        run.wait(timeout=10)
    assert sorted(p.name for p in temp.iterdir()) == []
