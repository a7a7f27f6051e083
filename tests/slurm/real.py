"""Helpers for the tests against the real Slurm started by scripts/slurm-ci.sh (partitions gpu: node1,
node2; cpu: node3). Tests share one Slurm, so each holds a file lock for its whole run."""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from hyperpod_scheduler.emulator.slurm_bridge import LocalSlurmd, SlurmdControl
from hyperpod_scheduler.slurm.commands import Slurm, SlurmError, SubprocessSlurm

REPO = Path(__file__).resolve().parents[2]
CI_SCRIPT = REPO / "scripts" / "slurm-ci.sh"
LOCK = Path("/var/tmp/hyperpod-scheduler-slurm-tests.lock")
NODES = ("node1", "node2", "node3")
WAIT_S = 60.0  # generous: only a broken Slurm takes this long, and then the test fails saying what it waited for

T = TypeVar("T")

JOB_SCRIPT = """#!/bin/bash
# A training job in miniature: saves a checkpoint on SIGUSR1 (and every second when PERIODIC=1).
ckpt_dir="$1"
mkdir -p "$ckpt_dir"
save() { echo "step $(date +%s%N)" >"$ckpt_dir/step-$(date +%s%N).pt"; }
trap save USR1
echo "$SLURM_JOB_ID" >"$ckpt_dir.started"
while true; do
    [ "${PERIODIC:-0}" = 1 ] && save
    sleep 1 & wait $!
done
"""


def slurm_problem() -> str | None:
    """Why the CI Slurm is not usable, or None."""
    try:
        nodes = SubprocessSlurm(timeout_s=10).nodes()
    except SlurmError as exc:
        return str(exc)
    missing = set(NODES) - {n.name for n in nodes}
    return f"nodes {sorted(missing)} are not in sinfo (not the slurm-ci.sh cluster?)" if missing else None


def ensure_slurm() -> None:
    problem = slurm_problem()
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(
            f"real Slurm is not running under CI: {problem}. The test command must run "
            "`bash scripts/slurm-ci.sh` as root before pytest.",
            pytrace=False,
        )
    if os.geteuid() != 0:
        pytest.skip(f"real Slurm not running ({problem}); run `sudo bash scripts/slurm-ci.sh` to enable these tests")
    done = subprocess.run(["bash", str(CI_SCRIPT)], capture_output=True, text=True, check=False)
    if done.returncode != 0 or slurm_problem():
        pytest.fail(f"scripts/slurm-ci.sh could not start Slurm: {done.stderr.strip() or done.stdout[-500:]}")


@contextmanager
def exclusive() -> Iterator[None]:
    with open(LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            reset()
            yield
        finally:
            reset()
            fcntl.flock(handle, fcntl.LOCK_UN)


def reset(slurm: Slurm | None = None, daemons: SlurmdControl | None = None) -> None:
    """No jobs, every node's slurmd running, every node idle and responding.

    A node's state can change between reading it and resuming it: a slurmd that was just started
    registers and, with ReturnToService=2, brings its DOWN node back by itself. Slurm refuses
    ``state=resume`` for a node that is not down or drained ("Invalid node state specified"), and one
    such name fails the whole ``scontrol update nodename=a,b`` (exit 1, though it resumed the others).
    So each node is resumed on its own, only while it still needs it, and that refusal only means
    "look again" until every node is idle.
    """
    slurm = slurm or SubprocessSlurm()
    daemons = daemons or LocalSlurmd()
    ids = [j.job_id for j in slurm.jobs()]
    if ids:
        subprocess.run(["scancel", *ids], check=False, capture_output=True)
    wait_for(lambda: not slurm.jobs(), "every test job to leave the queue")
    for name in NODES:  # a test that stood for a terminated instance may have stopped its slurmd
        daemons.start(name)

    def all_idle() -> bool:
        seen = {n.name: n for n in slurm.nodes() if n.name in NODES}
        for node in seen.values():
            if node.draining or node.state in STUCK_STATES:
                _resume_if_still_needed(slurm, node.name)
        return len(seen) == len(NODES) and all(n.state == "idle" and n.responding for n in seen.values())

    wait_for(all_idle, "every node to be idle")


# States only `scontrol update state=resume` leaves (drain/draining are matched by SlurmNode.draining).
STUCK_STATES = frozenset({"down", "drained", "fail", "failing"})
INVALID_STATE = "Invalid node state specified"


def _resume_if_still_needed(slurm: Slurm, name: str) -> None:
    try:
        slurm.resume([name])
    except SlurmError as exc:
        if INVALID_STATE not in str(exc):
            raise
        # It left the state between our look and the resume (it registered): the next look decides.


def wait_for(probe: Callable[[], T], what: str, timeout_s: float = WAIT_S) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.2)


def submit(shared: Path, name: str, ckpt_dir: Path, comment: str, *, partition: str, node: str, periodic: bool) -> str:
    script = shared / "job.sh"
    script.write_text(JOB_SCRIPT)
    env = {**os.environ, "PERIODIC": "1" if periodic else "0"}
    done = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--requeue",
            f"--job-name={name}",
            f"--partition={partition}",
            f"--nodelist={node}",
            f"--comment={comment}",
            f"--output={shared}/{name}-%j.out",
            str(script),
            str(ckpt_dir),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    job_id = done.stdout.strip().split(";")[0]
    # Running, and its trap is set (a USR1 before that would kill the shell).
    wait_for(lambda: Path(f"{ckpt_dir}.started").exists(), f"job {job_id} to start")
    return job_id


def job_field(job_id: str, field: str) -> str:
    text = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, check=True).stdout
    for part in text.split():
        if part.startswith(field + "="):
            return part.split("=", 1)[1]
    raise AssertionError(f"job {job_id} has no {field} in: {text}")


def node_states() -> dict[str, tuple[str, str]]:
    return {n.name: (n.state, n.reason) for n in SubprocessSlurm().nodes()}
