"""A cluster as one turn knows it: who it is, how it is reached, and what its own target says about it.

Resolved once per turn from the cluster's own target (``engine.fleet``: matched by account, region and
name, or by the tags that selected it) and passed down whole: the planner, the guards, the send, the
history line and the faces read this one value, never a lookup of their own by region and name.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hyperpod_scheduler.agent.settings import CheckpointSettings
from hyperpod_scheduler.config.model import Policy
from hyperpod_scheduler.store.records import cluster_key


@dataclass(frozen=True)
class ClusterSettings:
    """What the governing target says about one cluster (the nearest of cluster entry, target and
    defaults, field by field). ``governed_by`` names where it came from, for lines a person reads.

    ``unaudited``: the target said ``checkpoints: none``, an explicit choice that stops need no
    checkpoint audit (required before a scheduled stop of an EKS cluster, which has no audit yet)."""

    policy: Policy = field(default_factory=Policy)
    checkpoints: CheckpointSettings | None = None
    unaudited: bool = False
    governed_by: str = "defaults"


DEFAULT_SETTINGS = ClusterSettings()


@dataclass(frozen=True)
class ClusterRef:
    """A cluster the engine may act on: its store key, name, where to reach it, and its settings.

    ``account`` None: not known yet; ``key`` is then where the record was before account keys, and the
    engine learns the account from the cluster's ARN before it reads or writes anything for it.
    ``namesakes``: other profiles the config names a cluster of this name under, in this region.
    ``settings`` travel with the reference (``with_account`` and ``replace`` keep them), so whatever
    acts on it judges the cluster by its own target."""

    key: str
    name: str
    region: str | None = None
    profile: str | None = None
    account: str | None = None
    namesakes: tuple[str, ...] = ()
    settings: ClusterSettings = field(default=DEFAULT_SETTINGS, compare=False, hash=False, repr=False)

    def with_account(self, account: str) -> ClusterRef:
        return replace(self, account=account, key=cluster_key(self.name, self.region or "", account))

    def governed(self, settings: ClusterSettings) -> ClusterRef:
        return replace(self, settings=settings)


@dataclass(frozen=True)
class Result:
    cluster: str
    # skip | noop | sent | dry-run | in-progress | settled | failed | error | quiet | blocked | refused | waiting
    # (waiting: refused while deep health checks run; sent again at the next look, not a failure)
    kind: str
    message: str
