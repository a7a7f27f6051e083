"""The Slurm interface the agent uses, and its implementation over the Slurm command-line tools.

Every command runs with an argument list (no shell) and a timeout; a failure becomes ``SlurmError``
naming the command and Slurm's own first line of complaint.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from typing import Protocol

from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.slurm.model import SlurmJob, SlurmNode
from hyperpod_scheduler.slurm.parse import SINFO_FORMAT, SQUEUE_FORMAT, SlurmOutputError, parse_sinfo, parse_squeue

DEFAULT_TIMEOUT_S = 30.0


class SlurmError(HyperpodSchedulerError):
    """A Slurm command failed, timed out, or printed something we cannot read."""


class Slurm(Protocol):
    def jobs(self) -> list[SlurmJob]:
        """Every job Slurm knows (pending, running, completing)."""
        ...

    def nodes(self) -> list[SlurmNode]: ...

    def signal(self, job_id: str, signal: str, batch_only: bool) -> None:
        """Send ``signal`` to the job (to its batch shell only when ``batch_only``)."""
        ...

    def requeue(self, job_id: str) -> None: ...

    def drain(self, nodes: Sequence[str], reason: str) -> None: ...

    def resume(self, nodes: Sequence[str]) -> None: ...


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


class SubprocessSlurm:
    """Slurm through squeue, sinfo, scontrol and scancel on this host (the controller)."""

    def __init__(self, bin_dir: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, run: Runner = subprocess.run):
        self.bin_dir = bin_dir
        self.timeout_s = timeout_s
        self._run = run

    def __repr__(self) -> str:
        return f"SubprocessSlurm(bin_dir={self.bin_dir!r})"

    def _call(self, *args: str) -> str:
        argv = [os.path.join(self.bin_dir, args[0]) if self.bin_dir else args[0], *args[1:]]
        shown = " ".join(args)
        try:
            done = self._run(argv, capture_output=True, text=True, timeout=self.timeout_s, check=False)
        except FileNotFoundError:
            raise SlurmError(f"{args[0]}: not found (is Slurm installed on this host and on PATH?)") from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"`{shown}` did not answer within {self.timeout_s:g}s (is slurmctld up?)") from None
        if done.returncode != 0:
            why = (done.stderr or done.stdout or "").strip().splitlines()
            raise SlurmError(f"`{shown}` failed (exit {done.returncode}): {why[0] if why else 'no message'}")
        return done.stdout

    def jobs(self) -> list[SlurmJob]:
        text = self._call("squeue", "-h", "-a", "-t", "all", "-o", SQUEUE_FORMAT)
        try:
            return [j for j in parse_squeue(text) if j.state not in _FINISHED]
        except SlurmOutputError as exc:
            raise SlurmError(str(exc)) from None

    def nodes(self) -> list[SlurmNode]:
        text = self._call("sinfo", "-h", "-a", "-N", "-o", SINFO_FORMAT)
        try:
            return parse_sinfo(text)
        except SlurmOutputError as exc:
            raise SlurmError(str(exc)) from None

    def signal(self, job_id: str, signal: str, batch_only: bool) -> None:
        self._call("scancel", f"--signal={signal}", *(["--batch"] if batch_only else []), _job(job_id))

    def requeue(self, job_id: str) -> None:
        self._call("scontrol", "requeue", _job(job_id))

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        if nodes:
            self._call("scontrol", "update", f"nodename={','.join(nodes)}", "state=drain", f"reason={reason}")

    def resume(self, nodes: Sequence[str]) -> None:
        if nodes:
            self._call("scontrol", "update", f"nodename={','.join(nodes)}", "state=resume")


_FINISHED = frozenset(
    {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
)


def _job(job_id: str) -> str:
    # An id goes to scancel/scontrol as one argument; refuse anything that could read as an option.
    if not job_id or job_id.startswith("-") or not all(c.isalnum() or c in "_+" for c in job_id):
        raise SlurmError(f"job id {job_id!r} is not a Slurm job id")
    return job_id
