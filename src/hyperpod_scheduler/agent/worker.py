"""The Slurm side of a stop or a start: audit, signal, wait, drain, requeue; resume and readiness.

The same code answers an intent read from a channel (the agent on the controller) and a direct call
(the scheduler running on the controller itself). Time comes in through ``now`` and ``sleep``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hyperpod_scheduler.agent.audit import is_instance_local, jobs_on, judge, locate, nodes_for, summary
from hyperpod_scheduler.agent.finder import CheckpointFinder
from hyperpod_scheduler.agent.messages import AgentVerdict, Intent, JobAudit, SlurmShape
from hyperpod_scheduler.agent.readiness import readiness
from hyperpod_scheduler.agent.settings import DRAIN_REASON
from hyperpod_scheduler.agent.shape import local_shape
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.slurm.commands import Slurm
from hyperpod_scheduler.slurm.model import SlurmJob

log = logging.getLogger(__name__)


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class SlurmSide:
    slurm: Slurm
    finder: CheckpointFinder = field(default_factory=CheckpointFinder)
    now: Callable[[], datetime] = utc_now
    sleep: Callable[[float], None] = time.sleep
    name: str = "in-process"
    # The cluster's shape as this node sees it (``agent.shape``), given Slurm's node names and the time.
    shape_of: Callable[[Iterable[str], datetime], SlurmShape | None] = local_shape

    def shape(self) -> SlurmShape | None:
        """Which groups are the controller and compute here; None when it cannot be told (never an error:
        the verdict it rides on matters more)."""
        try:
            return self.shape_of([n.name for n in self.slurm.nodes()], self.now())
        except HyperpodSchedulerError as exc:
            log.warning("cluster shape not read: %s", exc)
            return None

    def handle(self, intent: Intent) -> AgentVerdict:
        """The verdict on ``intent``; a failure of Slurm or storage becomes a block, never a silent allow."""
        try:
            return self._stop(intent) if intent.action == "stop" else self._start(intent)
        except HyperpodSchedulerError as exc:
            return self._verdict(intent, "block", f"agent could not check Slurm: {exc}")

    # -- stop ------------------------------------------------------------------------------------

    def _stop(self, intent: Intent) -> AgentVerdict:
        settings = intent.settings
        per_group, unknown = nodes_for(intent.groups, self.slurm.nodes())
        targets = sorted({n for names in per_group.values() for n in names})
        jobs = jobs_on(self.slurm.jobs(), targets)
        audits = self._audit(jobs, intent)
        if unknown and settings.policy != "force":
            why = (
                f"cannot tell which Slurm nodes group(s) {', '.join(sorted(unknown))} hold: "
                "set checkpoints.partitions or checkpoints.nodes"
            )
            return self._verdict(intent, "block", why, jobs=audits)
        if settings.policy == "block" and any(a.verdict != "fresh" for a in audits):
            return self._verdict(intent, "block", summary(audits), jobs=audits)
        signalled: list[str] = []
        if settings.policy == "checkpoint-then-stop" and jobs and not intent.dry_run:
            audits, signalled = self._signal_and_wait(jobs, intent)
        if intent.dry_run:
            return self._verdict(intent, "allow", f"dry run: {summary(audits)}", jobs=audits)
        if self.now() >= intent.expires_at:
            # The scheduler has stopped waiting and judged the silence: draining now would strand nodes.
            why = f"the scheduler's wait ran out before the audit finished ({summary(audits)}); nothing changed"
            return self._verdict(intent, "block", why, jobs=audits, signalled=signalled)
        self.slurm.drain(targets, DRAIN_REASON)
        requeued, resubmit = [], []
        for job in jobs:
            if intent.requeue and self._requeue(job):
                requeued.append(job.job_id)
            else:
                resubmit.append(job.job_id)
        # Said as passed: the policy's name first ("block: no running jobs ...") read as a blocked stop.
        reason = f"audit passed (policy {settings.policy}): {summary(audits)}; drained {len(targets)} node(s)"
        if requeued:
            reason += f"; requeued {len(requeued)} job(s)"
        if resubmit:
            reason += f"; {len(resubmit)} job(s) must be resubmitted after the start"
        return self._verdict(
            intent,
            "allow",
            reason,
            jobs=audits,
            signalled=signalled,
            drained=targets,
            requeued=requeued,
            resubmit=resubmit,
        )

    def _audit(self, jobs: Sequence[SlurmJob], intent: Intent, since: datetime | None = None) -> list[JobAudit]:
        settings = intent.settings
        out = []
        for job in jobs:
            where = locate(job, settings)
            # Only a durable location is worth reading: a local one is "none" whatever it holds.
            durable = where.location is not None and not is_instance_local(where.location, settings)
            newest = self.finder.newest(where.location) if durable and where.location else None
            out.append(judge(job, where, newest, self.now(), settings, since))
        return out

    def _signal_and_wait(self, jobs: Sequence[SlurmJob], intent: Intent) -> tuple[list[JobAudit], list[str]]:
        settings = intent.settings
        started = self.now()
        signalled = []
        for job in jobs:
            try:
                self.slurm.signal(job.job_id, settings.signal, settings.signal_batch_only)
                signalled.append(job.job_id)
            except HyperpodSchedulerError as exc:  # e.g. the job ended meanwhile
                log.warning("signal to job %s failed: %s", job.job_id, exc)
        deadline = min(started + timedelta(minutes=settings.grace_minutes), intent.expires_at)
        while True:
            audits = self._audit(jobs, intent, since=started)
            if all(a.verdict == "fresh" for a in audits) or self.now() >= deadline:
                return audits, signalled
            self.sleep(min(settings.poll_seconds, max(0.0, (deadline - self.now()).total_seconds())))

    def _requeue(self, job: SlurmJob) -> bool:
        try:
            self.slurm.requeue(job.job_id)
            return True
        except HyperpodSchedulerError as exc:  # not requeueable (--no-requeue, or it just ended)
            log.warning("requeue of job %s failed: %s", job.job_id, exc)
            return False

    # -- start -----------------------------------------------------------------------------------

    def _start(self, intent: Intent) -> AgentVerdict:
        """Resume the nodes this scheduler drained, then wait (up to ready_timeout) until they take work."""
        nodes = self.slurm.nodes()
        per_group, _ = nodes_for(intent.groups, nodes)
        mine = {name for names in per_group.values() for name in names}
        # Only nodes drained by a scheduled stop: a node an admin drained stays drained.
        ours = sorted(n.name for n in nodes if n.name in mine and n.draining and n.reason == DRAIN_REASON)
        if ours and not intent.dry_run:
            self.slurm.resume(ours)
        deadline = self.now() + timedelta(minutes=intent.settings.ready_timeout_minutes)
        while True:
            nodes = self.slurm.nodes()
            ready, per = readiness(intent.groups, intent.expected, nodes)
            if ready or intent.dry_run or self.now() >= deadline:
                waiting = {g: r.not_ready for g, r in per.items() if r.usable < r.expected}
                reason = "every group's nodes joined Slurm" if ready else f"not ready yet: {waiting}"
                return self._verdict(intent, "allow", reason, resumed=ours, ready=ready, readiness=per)
            self.sleep(min(intent.settings.poll_seconds, max(0.0, (deadline - self.now()).total_seconds())))

    def _verdict(self, intent: Intent, decision: str, reason: str, **fields: object) -> AgentVerdict:
        return AgentVerdict.model_validate(
            {
                "intent_id": intent.id,
                "phase": "done",
                "decision": decision,
                "reason": reason,
                "at": self.now(),
                "agent": self.name,
                "shape": self.shape(),
                **fields,
            }
        )
