"""An in-memory Slurm for demos, dry runs and tests: jobs and nodes as plain values, every change
recorded in ``calls``. Requeue and drain behave as Slurm's do (a requeued job goes back to PENDING)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from hyperpod_scheduler.slurm.commands import SlurmError
from hyperpod_scheduler.slurm.model import SlurmJob, SlurmNode

CHANGES = ("signal", "requeue", "drain", "resume")


@dataclass
class MemorySlurm:
    nodes_: list[SlurmNode] = field(default_factory=list)
    jobs_: list[SlurmJob] = field(default_factory=list)
    # Called on every signal, e.g. to have a job write its checkpoint.
    on_signal: Callable[[str, str], None] | None = None
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def jobs(self) -> list[SlurmJob]:
        return list(self.jobs_)

    def nodes(self) -> list[SlurmNode]:
        return list(self.nodes_)

    def signal(self, job_id: str, signal: str, batch_only: bool) -> None:
        self.calls.append(("signal", job_id, signal, str(batch_only)))
        if self.on_signal:
            self.on_signal(job_id, signal)

    def requeue(self, job_id: str) -> None:
        self.calls.append(("requeue", job_id))
        self.jobs_ = [replace(j, state="PENDING", nodes=()) if j.job_id == job_id else j for j in self.jobs_]

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        self.calls.append(("drain", ",".join(nodes), reason))
        self._set(nodes, "drained", reason)

    def resume(self, nodes: Sequence[str]) -> None:
        self.calls.append(("resume", ",".join(nodes)))
        self._set(nodes, "idle", "")

    def changes(self) -> list[tuple[str, ...]]:
        """The calls that change Slurm (signal, requeue, drain, resume), in order."""
        return [c for c in self.calls if c[0] in CHANGES]

    def _set(self, names: Sequence[str], state: str, reason: str) -> None:
        unknown = set(names) - {n.name for n in self.nodes_}
        if unknown:
            raise SlurmError(f"scontrol: invalid node name(s) {sorted(unknown)}")
        self.nodes_ = [replace(n, state=state, reason=reason) if n.name in names else n for n in self.nodes_]
