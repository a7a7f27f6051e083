"""What the scheduler and the agent say to each other through a channel (JSON, versioned by field).

One intent per cluster at a time: a newer intent replaces the older one. The agent answers with a
verdict carrying the intent's id, first ``working`` (proof of life: it picked the intent up), then
``done``. Unknown fields are kept, so a newer scheduler can talk to an older agent.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from hyperpod_scheduler.agent.settings import CheckpointSettings

IntentAction = Literal["stop", "start"]
Freshness = Literal["fresh", "stale", "none"]
Decision = Literal["allow", "block"]
VerdictPhase = Literal["working", "done", "expired"]
Source = Literal["comment", "rule", "default"]


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class NodeSelector(_Message):
    """The Slurm nodes an instance group holds: explicit names/hostlists, else a whole partition."""

    partition: str | None = None
    nodes: list[str] = Field(default_factory=list)

    @property
    def known(self) -> bool:
        return bool(self.partition or self.nodes)


class Intent(_Message):
    id: str = Field(min_length=1)
    cluster: str = Field(min_length=1)  # the store key of the cluster
    action: IntentAction
    groups: dict[str, NodeSelector]  # stop: the groups to zero; start: the groups coming back
    expected: dict[str, int] = Field(default_factory=dict)  # start: nodes per group that must join
    requeue: bool = False  # the Slurm head survives: requeue interrupted jobs
    dry_run: bool = False  # audit only: no signal, drain or requeue
    settings: CheckpointSettings
    posted_at: AwareDatetime
    expires_at: AwareDatetime  # after this the scheduler has stopped waiting: never act on it


class JobAudit(_Message):
    job_id: str
    name: str
    user: str = ""
    nodes: list[str] = Field(default_factory=list)
    location: str | None = None
    source: Source | None = None
    newest: AwareDatetime | None = None
    age_s: float | None = None
    verdict: Freshness
    reason: str


class GroupReadiness(_Message):
    expected: int
    joined: int  # nodes Slurm lists for the group
    usable: int  # of those, idle or allocated and responding
    not_ready: list[str] = Field(default_factory=list)


class SlurmShape(_Message):
    """Which instance groups the agent on the controller sees in which Slurm role (``agent.shape``):
    from the node's own resource_config.json (groups and their hosts) and Slurm's node list. The
    scheduler reads it when neither SlurmConfig nor provisioning_parameters.json names a group's role."""

    controller: str = Field(min_length=1)  # the group holding the agent's own host
    compute: list[str] = Field(default_factory=list)  # groups with a host Slurm lists as a node
    others: list[str] = Field(default_factory=list)  # neither (login nodes, a group at zero): not said
    cluster_arn: str | None = None  # ClusterConfig.ClusterArn: the cluster this view is of
    seen_at: AwareDatetime


class AgentVerdict(_Message):
    intent_id: str
    phase: VerdictPhase
    decision: Decision | None = None  # set when phase is done
    reason: str = ""
    at: AwareDatetime
    agent: str = ""
    jobs: list[JobAudit] = Field(default_factory=list)
    signalled: list[str] = Field(default_factory=list)
    drained: list[str] = Field(default_factory=list)
    requeued: list[str] = Field(default_factory=list)
    resubmit: list[str] = Field(default_factory=list)  # interrupted jobs the head will not remember
    resumed: list[str] = Field(default_factory=list)
    ready: bool | None = None
    readiness: dict[str, GroupReadiness] = Field(default_factory=dict)
    # The Slurm roles of the cluster's groups as the agent sees them; None from an agent older than
    # this field, or one that could not read resource_config.json.
    shape: SlurmShape | None = None
