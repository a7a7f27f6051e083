"""The checkpoint audit (pure): where each job keeps its checkpoints, and how fresh the newest is.

A location on instance-local storage counts as no checkpoint at all: it dies with the instance.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from hyperpod_scheduler.agent.messages import Freshness, JobAudit, NodeSelector, Source
from hyperpod_scheduler.agent.settings import CheckpointSettings
from hyperpod_scheduler.slurm.model import SlurmJob, SlurmNode
from hyperpod_scheduler.slurm.parse import expand_hostlist


@dataclass(frozen=True)
class Located:
    location: str | None
    source: Source | None


def locate(job: SlurmJob, settings: CheckpointSettings) -> Located:
    """The job's checkpoint location: its comment (``ckpt:<location>``), a rule by job name, the default."""
    for part in job.comment.split():
        if part.startswith(settings.comment_prefix) and len(part) > len(settings.comment_prefix):
            return Located(_fill(part[len(settings.comment_prefix) :], job), "comment")
    for rule in settings.locations:
        if rule.matches(job.name):
            return Located(_fill(rule.location, job), "rule")
    if settings.location:
        return Located(_fill(settings.location, job), "default")
    return Located(None, None)


def _fill(template: str, job: SlurmJob) -> str:
    return template.replace("{job_name}", job.name).replace("{job_id}", job.job_id).replace("{user}", job.user)


def is_instance_local(location: str, settings: CheckpointSettings) -> bool:
    """True for a path under instance-local storage (by whole path components: /tmpfs is not /tmp)."""
    if location.startswith("s3://"):
        return False
    path = posixpath.normpath(location)
    for prefix in settings.local_prefixes():
        base = posixpath.normpath(prefix)
        if path == base or path.startswith(base.rstrip("/") + "/"):
            return True
    return False


def judge(
    job: SlurmJob,
    where: Located,
    newest: datetime | None,
    now: datetime,
    settings: CheckpointSettings,
    since: datetime | None = None,
) -> JobAudit:
    """Fresh: the newest checkpoint is younger than ``max_age`` (and, with ``since``, written after it)."""

    def audit(verdict: Freshness, reason: str, age: float | None = None) -> JobAudit:
        return JobAudit(
            job_id=job.job_id,
            name=job.name,
            user=job.user,
            nodes=list(job.nodes),
            location=where.location,
            source=where.source,
            newest=newest if age is not None else None,
            age_s=age,
            verdict=verdict,
            reason=reason,
        )

    if where.location is None:
        return audit("none", "no checkpoint location configured for this job")
    if is_instance_local(where.location, settings):
        return audit("none", f"{where.location} is instance-local storage: it dies at scale-in")
    if newest is None:
        return audit("none", f"no checkpoint under {where.location}")
    age = max(0.0, (now - newest).total_seconds())
    if since is not None and newest < since:
        return audit("stale", f"no checkpoint since the signal (newest is {_minutes(age)} old)", age)
    if age > settings.max_age_s():
        return audit("stale", f"newest checkpoint is {_minutes(age)} old (max {settings.max_age_minutes:g}m)", age)
    return audit("fresh", f"newest checkpoint is {_minutes(age)} old", age)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}m"


def nodes_for(groups: Mapping[str, NodeSelector], nodes: Sequence[SlurmNode]) -> tuple[dict[str, list[str]], list[str]]:
    """Per group the Slurm node names it holds, and the groups that match no node (so cannot be judged)."""
    found: dict[str, list[str]] = {}
    unknown: list[str] = []
    known_names = {n.name for n in nodes}
    for group, selector in groups.items():
        names: list[str] = []
        for expr in selector.nodes:
            names.extend(n for n in expand_hostlist(expr) if n in known_names)
        if not selector.nodes and selector.partition:
            names = [n.name for n in nodes if selector.partition in n.partitions]
        if not names and not selector.known:
            unknown.append(group)
        found[group] = sorted(set(names))
    return found, unknown


def jobs_on(jobs: Iterable[SlurmJob], node_names: Iterable[str]) -> list[SlurmJob]:
    """The active jobs holding any of ``node_names``."""
    targets = set(node_names)
    return [j for j in jobs if j.active and targets.intersection(j.nodes)]


def summary(audits: Sequence[JobAudit]) -> str:
    if not audits:
        return "no running jobs on these groups"
    bad = [a for a in audits if a.verdict != "fresh"]
    if not bad:
        return f"{len(audits)} job(s), every one with a fresh checkpoint"
    shown = "; ".join(f"job {a.job_id} ({a.name}): {a.verdict}: {a.reason}" for a in bad[:5])
    more = f" (+{len(bad) - 5} more)" if len(bad) > 5 else ""
    return f"{len(bad)} of {len(audits)} job(s) without a fresh checkpoint: {shown}{more}"
