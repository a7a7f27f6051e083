"""Stops whose jobs no checkpoint audit can see.

The checkpoint audit asks Slurm which jobs run on the groups a stop zeroes. An EKS-orchestrated cluster
has no such audit yet: its pods die at scale-in with nobody having looked for a checkpoint. So a
scheduled stop of one goes ahead only when its target says so on purpose (``checkpoints: none``); a
stop a person asks for goes ahead, and every stop of one says in its history line that no audit ran
(``engine.settling``)."""

from __future__ import annotations

from hyperpod_scheduler.guards.base import Guard, StopContext, Verdict

UNAUDITED_EKS = "none: no checkpoint audit ran (an EKS cluster's pods are not audited; no Kubernetes audit yet)"


_SAY = {"audit": "none"}  # an allow with detail is said as a note (engine.guard_round)


class AuditCoverage(Guard):
    name = "checkpoints"

    def __init__(self, unaudited: bool) -> None:
        """``unaudited``: the cluster's target said ``checkpoints: none``."""
        self.unaudited = unaudited

    def before_stop(self, ctx: StopContext) -> Verdict:
        if ctx.view.orchestrator != "Eks" or not ctx.groups_to_zero:
            return Verdict(self.name, "allow", "audited by Slurm, or nothing to zero")
        if self.unaudited:
            return Verdict(self.name, "allow", f"audit {UNAUDITED_EKS}; its target says checkpoints: none", detail=_SAY)
        if ctx.origin != "schedule":
            return Verdict(self.name, "allow", f"audit {UNAUDITED_EKS}; asked for by a person", detail=_SAY)
        return Verdict(
            self.name,
            "block",
            "an EKS cluster's pods have no checkpoint audit yet: a scheduled stop would kill them unaudited; "
            "set `checkpoints: none` on its target to stop it on schedule anyway",
        )
