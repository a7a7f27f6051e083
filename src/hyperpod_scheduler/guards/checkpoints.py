"""The checkpoint guard: before a stop, ask the Slurm side (the agent on the controller, or the same
code in-process) whether the jobs on the groups to zero have fresh checkpoints, and let it drain,
signal and requeue according to the cluster's policy.

A silent agent is judged by ``silent_agent`` (block by default): instances are never terminated under
running jobs just because nobody answered.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from hyperpod_scheduler.agent.channel import Channel, open_channel
from hyperpod_scheduler.agent.messages import AgentVerdict, Intent, NodeSelector, SlurmShape
from hyperpod_scheduler.agent.settings import CheckpointSettings
from hyperpod_scheduler.agent.worker import SlurmSide
from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.guards.base import Guard, StopContext, Verdict
from hyperpod_scheduler.slurm.commands import SubprocessSlurm

HEAD_NODE_TYPES = frozenset({"Controller", "Login"})


class AgentLink(Protocol):
    def ask(self, intent: Intent) -> AgentVerdict | None:
        """The agent's final verdict, or None when it stayed silent past its timeout."""
        ...

    def shape(self, cluster: str) -> SlurmShape | None:
        """The cluster's Slurm roles as the agent last saw them (its latest verdict's ``shape``); None
        when it has said none (an older agent, or no verdict yet). Asks nothing: reads what was said."""
        ...


class LocalLink:
    """The scheduler runs on the controller: no channel, the Slurm side runs right here."""

    def __init__(self, side: SlurmSide) -> None:
        self.side = side

    def ask(self, intent: Intent) -> AgentVerdict | None:
        return self.side.handle(intent)

    def shape(self, cluster: str) -> SlurmShape | None:
        return self.side.shape()


class ChannelLink:
    """Post the intent, then wait: ``agent_timeout`` for the agent to pick it up (its ``working``
    verdict), then until the intent expires. An agent only acts before ``expires_at``, so a working
    one is given one more timeout past it to write down what it did."""

    def __init__(
        self,
        channel: Channel,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
        poll_seconds: float | None = None,
    ) -> None:
        self.channel = channel
        self.now = now
        self.sleep = sleep
        self.poll_seconds = poll_seconds

    def ask(self, intent: Intent) -> AgentVerdict | None:
        self.channel.post_intent(intent)
        timeout = timedelta(seconds=intent.settings.agent_timeout_seconds)
        poll = self.poll_seconds if self.poll_seconds is not None else min(intent.settings.poll_seconds, 2.0)
        while True:
            verdict = self.channel.read_verdict(intent.cluster)
            mine = verdict if verdict is not None and verdict.intent_id == intent.id else None
            if mine is not None and mine.phase != "working":
                return mine if mine.phase == "done" else None
            now = self.now()
            if mine is None and now >= intent.posted_at + timeout:
                return None
            if now >= intent.expires_at + timeout:
                return None
            self.sleep(poll)

    def shape(self, cluster: str) -> SlurmShape | None:
        verdict = self.channel.read_verdict(cluster)
        return verdict.shape if verdict is not None else None


def work_budget(settings: CheckpointSettings, action: str) -> timedelta:
    """How long the agent may take once it has the intent, plus one agent timeout for slack."""
    work = settings.grace_minutes if action == "stop" else settings.ready_timeout_minutes
    return timedelta(minutes=work, seconds=2 * settings.agent_timeout_seconds)


def selectors(view: ClusterView, groups: tuple[str, ...], settings: CheckpointSettings) -> dict[str, NodeSelector]:
    """Per compute group to zero, how to find its Slurm nodes: configured node names, a configured
    partition, else the group's SlurmConfig partition. Controller and Login groups run no jobs."""
    out: dict[str, NodeSelector] = {}
    for name in groups:
        group = view.group(name)
        if group is not None and group.node_type in HEAD_NODE_TYPES:
            continue
        if name in settings.nodes:
            out[name] = NodeSelector(nodes=list(settings.nodes[name]))
            continue
        partition = settings.partitions.get(name)
        if partition is None and group is not None:
            slurm_config = group.details.get("SlurmConfig")
            names = slurm_config.get("PartitionNames") if isinstance(slurm_config, Mapping) else None
            partition = names[0] if isinstance(names, list) and names and isinstance(names[0], str) else None
        out[name] = NodeSelector(partition=partition)
    return out


def head_survives(ctx: StopContext, keep_slurm_head: bool | None) -> bool:
    """The Slurm queue outlives the night when the head is kept, or when the controller group is not
    among the groups to zero."""
    if keep_slurm_head:
        return True
    controllers = [g.name for g in ctx.view.groups if g.node_type == "Controller"]
    return bool(controllers) and not any(c in ctx.groups_to_zero for c in controllers)


class CheckpointGuard(Guard):
    """A guard with side effects: on ``allow`` the Slurm side has already signalled, drained and
    requeued. The engine should run it after every other guard allowed, with the groups those
    guards keep removed from ``groups_to_zero`` (``side_effects`` marks such guards)."""

    name = "checkpoints"
    side_effects = True
    after_start = True

    def __init__(
        self,
        settings: CheckpointSettings,
        link: AgentLink,
        *,
        keep_slurm_head: bool | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.settings = settings
        self.link = link
        self.keep_slurm_head = keep_slurm_head
        self.now = now

    @classmethod
    def for_cluster(
        cls, settings: CheckpointSettings, *, keep_slurm_head: bool | None = None, s3_client: Any = None
    ) -> CheckpointGuard:
        """The guard as configured: through ``settings.channel``, or in-process when it is unset."""
        link: AgentLink
        if settings.channel:
            link = ChannelLink(open_channel(settings.channel, s3_client))
        else:
            link = LocalLink(SlurmSide(SubprocessSlurm()))
        return cls(settings, link, keep_slurm_head=keep_slurm_head)

    def intent_for(self, ctx: StopContext) -> Intent:
        settings = self.settings
        requeue = settings.requeue
        if requeue is None:
            requeue = settings.slurmctld_state_shared or head_survives(ctx, self.keep_slurm_head)
        posted = self.now()
        return Intent(
            id=uuid.uuid4().hex,
            cluster=ctx.key,
            action="stop",
            groups=selectors(ctx.view, ctx.groups_to_zero, settings),
            requeue=requeue,
            dry_run=ctx.dry_run,
            settings=settings,
            posted_at=posted,
            expires_at=posted + work_budget(settings, "stop"),
        )

    def started(
        self, key: str, view: ClusterView, expected: Mapping[str, int], dry_run: bool = False
    ) -> AgentVerdict | None:
        """After a start settles: resume the nodes the stop drained and wait until ``expected`` nodes
        per compute group are idle or allocated in Slurm. None when the agent stayed silent."""
        chosen = selectors(view, tuple(expected), self.settings)
        posted = self.now()
        intent = Intent(
            id=uuid.uuid4().hex,
            cluster=key,
            action="start",
            groups=chosen,
            expected={g: n for g, n in expected.items() if g in chosen},
            dry_run=dry_run,
            settings=self.settings,
            posted_at=posted,
            expires_at=posted + work_budget(self.settings, "start"),
        )
        return self.link.ask(intent)

    def before_stop(self, ctx: StopContext) -> Verdict:
        intent = self.intent_for(ctx)
        if not intent.groups:
            return Verdict(self.name, "allow", "no compute groups to zero: no jobs to audit")
        answer = self.link.ask(intent)
        if answer is None:
            silent = self.settings.silent_agent
            reason = f"the Slurm agent did not answer within {self.settings.agent_timeout_seconds:g}s"
            return Verdict(self.name, silent, f"{reason} (silent_agent: {silent})", detail={"silent": True})
        detail = answer.model_dump(mode="json", include={"jobs", "signalled", "drained", "requeued", "resubmit"})
        return Verdict(self.name, answer.decision or "block", answer.reason, detail=detail)
