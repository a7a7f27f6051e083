"""A cluster as one turn knows it: who it is, how it is reached, and what its own target says about it.

Resolved once per turn from the cluster's own target (``engine.fleet``: matched by account, region and
name, or by the tags that selected it) and passed down whole: the planner, the guards, the send, the
history line and the faces read this one value, never a lookup of their own by region and name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta

from hyperpod_scheduler.agent.settings import CheckpointSettings
from hyperpod_scheduler.config.model import ImageMode, Policy
from hyperpod_scheduler.store.records import cluster_key

DEFAULT_SETTLE_DAYS = 3.0


@dataclass(frozen=True)
class ImagePolicy:
    """Which AMI release each group is restored on (``engine.images``), resolved from the policy."""

    default: ImageMode = "pinned"
    groups: Mapping[str, ImageMode] = field(default_factory=dict)
    settle: timedelta = timedelta(days=DEFAULT_SETTLE_DAYS)
    approve: bool = False

    def mode(self, group: str) -> ImageMode:
        return self.groups.get(group, self.default)

    @property
    def moves(self) -> bool:
        """Whether any group may ever change release under this policy."""
        return self.default != "pinned" or any(m != "pinned" for m in self.groups.values())

    @classmethod
    def of(cls, policy: Policy) -> ImagePolicy:
        days = DEFAULT_SETTLE_DAYS if policy.image_settle_days is None else policy.image_settle_days
        return cls(
            default=policy.image or "pinned",
            groups=dict(policy.image_groups or {}),
            settle=timedelta(days=days),
            approve=bool(policy.approve_image),
        )


@dataclass(frozen=True)
class ClusterSettings:
    """What the governing target says about one cluster (the nearest of cluster entry, target and
    defaults, field by field). ``governed_by`` names where it came from, for lines a person reads.

    ``unaudited``: the target said ``checkpoints: none``, an explicit choice that stops need no
    checkpoint audit (required before a scheduled stop of an EKS cluster, which has no audit yet)."""

    policy: Policy = field(default_factory=Policy)
    image: ImagePolicy = field(default_factory=ImagePolicy)
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

    @property
    def where(self) -> str:
        """Which of the clusters of this name in its region this one is, where the config governs more
        than one (``namesakes``): its account, else the profile that reaches it; "" when the name says."""
        if not self.namesakes:
            return ""
        return f"account {self.account}" if self.account else f"profile {self.profile or 'default'}"

    def command(self, verb: str, *more: str) -> str:
        """The command a line tells the user to run on this cluster, quoted: with ``--region`` and
        ``--profile`` as this cluster is reached, so it names this cluster and no namesake (a bare name
        that two targets govern is refused)."""
        where = [
            *(["--region", self.region] if self.region else []),
            *(["--profile", self.profile] if self.profile else []),
        ]
        return "`" + " ".join(["hyperpod-scheduler", verb, self.name, *where, *more]) + "`"


@dataclass(frozen=True)
class Result:
    cluster: str
    # skip | noop | sent | dry-run | in-progress | settled | failed | error | quiet | blocked | refused | waiting
    # (waiting: refused while deep health checks run; sent again at the next look, not a failure)
    kind: str
    message: str
    # A first look (``fleet.first_look``) that AWS answered with ResourceNotFound: no cluster of this
    # name through this reach, so it cannot be the cluster a namesake target found.
    no_cluster: bool = False
