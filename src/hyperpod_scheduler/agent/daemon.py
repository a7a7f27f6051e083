"""The agent loop on the controller: pick up intents from a channel, do the Slurm side, write verdicts.

Each intent is answered once (its id is remembered in the verdict). An intent past its ``expires_at``
is never acted on: the scheduler stopped waiting and applied its silent-agent policy already.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Sequence

from hyperpod_scheduler.agent.channel import Channel
from hyperpod_scheduler.agent.messages import AgentVerdict, Intent
from hyperpod_scheduler.agent.worker import SlurmSide
from hyperpod_scheduler.errors import HyperpodSchedulerError

log = logging.getLogger(__name__)


def agent_name() -> str:
    return f"agent@{socket.gethostname()}"


def serve_once(channel: Channel, side: SlurmSide, clusters: Sequence[str] = ()) -> list[AgentVerdict]:
    """Answer every unanswered intent (of ``clusters``, or of every cluster when empty); returns the verdicts."""
    answered = []
    for cluster in clusters or channel.clusters():
        intent = channel.read_intent(cluster)
        if intent is None:
            continue
        previous = channel.read_verdict(cluster)
        if previous is not None and previous.intent_id == intent.id and previous.phase != "working":
            continue
        answered.append(_answer(channel, side, cluster, intent))
    return answered


def _answer(channel: Channel, side: SlurmSide, cluster: str, intent: Intent) -> AgentVerdict:
    now = side.now()
    if now >= intent.expires_at:
        verdict = AgentVerdict(
            intent_id=intent.id,
            phase="expired",
            reason="intent expired before the agent saw it",
            at=now,
            agent=side.name,
            shape=side.shape(),  # the latest verdict is where the scheduler reads the agent's view
        )
        channel.post_verdict(cluster, verdict)
        return verdict
    # Proof of life first: the scheduler then waits for the work (grace period) instead of timing out.
    channel.post_verdict(cluster, AgentVerdict(intent_id=intent.id, phase="working", at=now, agent=side.name))
    log.info("cluster %s: %s intent %s", cluster, intent.action, intent.id)
    verdict = side.handle(intent)
    channel.post_verdict(cluster, verdict)
    log.info("cluster %s: %s (%s)", cluster, verdict.decision, verdict.reason)
    return verdict


def serve(
    channel: Channel,
    side: SlurmSide,
    clusters: Sequence[str] = (),
    poll_seconds: float = 5.0,
    stop: threading.Event | None = None,
) -> None:
    """Serve until ``stop`` is set. A failed poll is logged and retried, never fatal: a dead agent
    would only turn every stop into a silent-agent verdict."""
    stop = stop or threading.Event()
    while not stop.is_set():
        try:
            serve_once(channel, side, clusters)
        except HyperpodSchedulerError as exc:
            log.warning("agent poll failed: %s", exc)
        except Exception:
            log.exception("agent poll failed unexpectedly")
        stop.wait(poll_seconds)
