"""The Slurm side of scheduled stops and starts: checkpoint audit, the agent on the controller, and the
channel it shares with the scheduler (docs/checkpoints.md)."""

from hyperpod_scheduler.agent.channel import Channel, S3Channel, StoreChannel, open_channel
from hyperpod_scheduler.agent.messages import AgentVerdict, GroupReadiness, Intent, JobAudit, NodeSelector
from hyperpod_scheduler.agent.readiness import ReadinessProbe, readiness
from hyperpod_scheduler.agent.settings import CheckpointSettings, LocationRule
from hyperpod_scheduler.agent.worker import SlurmSide

__all__ = [
    "AgentVerdict",
    "Channel",
    "CheckpointSettings",
    "GroupReadiness",
    "Intent",
    "JobAudit",
    "LocationRule",
    "NodeSelector",
    "ReadinessProbe",
    "S3Channel",
    "SlurmSide",
    "StoreChannel",
    "open_channel",
    "readiness",
]
