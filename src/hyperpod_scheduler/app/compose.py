"""The composition root: the one place where a config and the outside world become the engine.

Every face (the CLI, the dashboard, the Lambda worker, the demo) hands in what differs between them:
the state store, how to reach AWS for a cluster, the clock, who hears the events and who is acting.
Everything the config says is wired here and only here: the capacity policy with its floors and
``keep`` groups, the checkpoint audit through the configured channel, start retries, the lease TTL,
the settle timeout, ready-by lead times, tick concurrency, notifications and prices. So a setting is
honoured by every face or by none; ``tests/architecture`` fails if any other module builds ``Engine``.

The engine, its guards and the agent's channels are imported where they are built, not with this
module: ``report`` and the dashboard's read-only pages compose a context and never build an engine,
and importing all of it cost them a tenth of a second before anything ran.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from hyperpod_scheduler.aws.clients import aws_client, sagemaker_client
from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.cost import pricelist
from hyperpod_scheduler.cost.prices import PriceTable
from hyperpod_scheduler.cost.sources import resolve as resolve_prices
from hyperpod_scheduler.engine.events import Sink, discard
from hyperpod_scheduler.notify.channels import Notifier, channels_from
from hyperpod_scheduler.store import open_store

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from hyperpod_scheduler.agent.channel import Channel
    from hyperpod_scheduler.agent.messages import SlurmShape
    from hyperpod_scheduler.agent.settings import CheckpointSettings
    from hyperpod_scheduler.app.looks import Looks
    from hyperpod_scheduler.engine.fleet import AccountLookup, Fleet, Governed, Pool
    from hyperpod_scheduler.engine.readiness import Lead
    from hyperpod_scheduler.engine.runner import ClusterRef, Engine, Result
    from hyperpod_scheduler.guards.base import StopGuard
    from hyperpod_scheduler.guards.checkpoints import AgentLink
    from hyperpod_scheduler.store.base import StateStore
    from hyperpod_scheduler.store.records import Approval


@dataclass(frozen=True)
class Clients:
    """How to reach AWS. Per cluster where the account matters (SageMaker, an ``s3://`` checkpoint
    channel: the CLI's profile, the worker's assumed spoke role); per region for SNS; the Price List
    API only when the config asks for it."""

    sagemaker: Callable[[ClusterRef], SageMakerClient]
    s3: Callable[[ClusterRef], Any]
    sns: Callable[[str | None], Any]
    pricing: Callable[[], Any]


def chain_clients(sagemaker: Callable[[ClusterRef], SageMakerClient] | None = None) -> Clients:
    """Clients from the standard AWS chain (profile, region, ``AWS_ENDPOINT_URL_*``), one per service,
    region and profile (boto3 clients are thread-safe and reusable). ``sagemaker`` replaces the
    SageMaker one (an emulator client in the demo and the tests)."""
    made: dict[tuple[str, str | None, str | None], Any] = {}
    lock = threading.Lock()

    def client(service: str, region: str | None, profile: str | None = None) -> Any:
        with lock:  # boto3 sessions are not safe to create clients from in several threads at once
            key = (service, region, profile)
            if key not in made:
                # The standard chain with the loopback rule (aws.clients): while SageMaker is an emulator
                # on loopback, no other service's call may leave this machine.
                made[key] = (
                    sagemaker_client(profile, region)
                    if service == "sagemaker"
                    else aws_client(service, profile, region)
                )
            return made[key]

    return Clients(
        sagemaker=sagemaker or (lambda ref: client("sagemaker", ref.region, ref.profile)),
        s3=lambda ref: client("s3", ref.region, ref.profile),
        sns=lambda region: client("sns", region),
        pricing=lambda: client("pricing", pricelist.PRICING_REGION),
    )


@dataclass(frozen=True)
class LocalAgent:
    """The Slurm side of the checkpoint audit reached in this process rather than through the
    config's channel (the demo's in-memory Slurm). ``now`` is that Slurm side's clock."""

    link_for: Callable[[ClusterRef, CheckpointSettings], AgentLink]
    now: Callable[[], datetime]


@dataclass(frozen=True)
class Pause:
    """The fleet's pause switch is on: no transition anywhere. ``by`` names the setting that says so;
    ``since`` is when that setting was pushed (None: not known, a config pushed before it was stamped)."""

    by: str
    since: datetime | None = None

    def line(self) -> str:
        when = f" since {self.since:%Y-%m-%d %H:%M}Z" if self.since else " (since: not recorded)"
        return f"scheduling PAUSED by {self.by}{when}: no cluster is stopped or started"


@dataclass(frozen=True)
class Source:
    """Where a face's config, state and AWS reach come from: the config file with its store and the
    AWS chain, or the hub's table with the pushed fleet config and each target's assumed role."""

    config: Config
    store: StateStore
    clients: Clients
    paused: Pause | None = None
    # Which account a way of reaching a cluster reaches, when the source knows it (the fleet config names
    # each target's account); None: the store's memory, learned from cluster ARNs.
    accounts: AccountLookup | None = None


def _wall_clock() -> datetime:
    return datetime.now(UTC)


class Context:
    """A config composed with its edges: the fleet it governs, the engine that acts on it, and what
    every face shows beside (lead times, prices). Cheap to build; channels it opened close with it."""

    def __init__(
        self,
        config: Config,
        store: StateStore,
        clients: Clients,
        now: Callable[[], datetime],
        events: Sink = discard,
        *,
        actor: str = "scheduler",
        sleep: Callable[[float], None] = time.sleep,
        agent: LocalAgent | None = None,
        warn: Callable[[str], None] = lambda _: None,
        notify: bool = True,
        paused: Pause | None = None,
        accounts: AccountLookup | None = None,
        looks: Looks | None = None,
    ) -> None:
        self.config = config
        # The faces' shared cache of DescribeCluster answers (app.looks): the engine's own looks keep it fresh.
        self.looks = looks
        # Faces read this one fact to say the fleet is paused (status, the Fleet page).
        self.paused = paused
        self.accounts = accounts
        self.store = store
        self.clients = clients
        self.now = now
        self.actor = actor
        self.sleep = sleep
        self.agent = agent
        self.warn = warn
        # The config's channels, else the environment's (``notify=False``: none, e.g. in the demo).
        channels = channels_from(config.notifications, clients.sns) if notify else []
        self.events: Sink = Notifier(channels, on_error=warn, forward=events) if channels else events
        self._fleet: Fleet | None = None
        self._prices: PriceTable | None = None
        self._channels: dict[str, Channel] = {}
        self._channel_stores: list[StateStore] = []
        self._lock = threading.Lock()

    # ---- what the config governs -----------------------------------------------------------------
    def client_for(self, ref: ClusterRef) -> SageMakerClient:
        return self.clients.sagemaker(ref)

    def fleet(self) -> Fleet:
        from hyperpod_scheduler.engine.fleet import Fleet

        if self._fleet is None:
            self._fleet = Fleet(self.config, self.client_for, self.accounts or self.store.account_for)
        return self._fleet

    def reconfigured(self, config: Config) -> Context:
        """This context under an edited config (``run`` following its file): the same store, clients,
        clock and event sinks; the fleet and prices built afresh. Where state lives and who is notified
        stay as they were at start (the store is open, the channels are wired)."""
        config = config.model_copy(update={"state": self.config.state, "notifications": self.config.notifications})
        other = copy.copy(self)
        other.config, other._fleet, other._prices = config, None, None
        return other

    # ---- the engine ------------------------------------------------------------------------------
    def engine(self, actor: str | None = None, include_protected: bool = False) -> Engine:
        """The engine with every setting of the config; ``include_protected`` releases protected
        groups for one manual stop."""
        from hyperpod_scheduler.app.releases import release_source
        from hyperpod_scheduler.engine.runner import Engine

        defaults = self.config.defaults
        return Engine(
            self.store,
            self.client_for,
            self.now,
            events=self.events,
            actor=actor or self.actor,
            settle_timeout=timedelta(minutes=defaults.settle_timeout_minutes),
            sleep=self.sleep,
            lease_ttl_s=defaults.lease_ttl_seconds,
            guards_for=lambda ref: self.guards_built(ref, include_protected),
            retry=defaults.retry,
            read_file=self.read_file,
            releases=release_source(self.config),
            slurm_shape=self.slurm_shape,
            looked=self.looks.record if self.looks is not None else None,
            changing=self.looks.changing if self.looks is not None else None,
        )

    def read_file(self, ref: ClusterRef, uri: str) -> bytes:
        """A cluster's provisioning_parameters.json (its Slurm roles), through its account's S3 client."""
        from hyperpod_scheduler.engine.slurm_roles import read_s3_file

        return read_s3_file(self.clients.s3(ref), uri)

    def tick(
        self,
        governed: Iterable[Governed],
        *,
        dry_run: bool = False,
        engine: Engine | None = None,
        pool: Pool | None = None,
    ) -> list[Result]:
        """One reconcile pass with the config's ready-by settings and concurrency. ``pool`` runs the
        turns (the Lambda worker's own); a cluster's failure is that cluster's alone (``fleet.caught``)."""
        from hyperpod_scheduler.engine.fleet import tick

        defaults = self.config.defaults
        governed = list(governed)
        eng = engine or self.engine()

        def run(these: Sequence[Governed]) -> list[Result]:
            return tick(
                eng,
                these,
                self.now(),
                dry_run=dry_run,
                ready_by=defaults.ready_by,
                concurrency=defaults.concurrency,
                dashboard_url=self.config.notifications.dashboard_url,
                pool=pool,
            )

        results = run(governed)
        looked = [i for i, g in enumerate(governed) if g.looks_first and results[i].kind == "waiting"]
        if looked and not dry_run:
            self._after_first_looks(governed, results, looked, run, eng)
        return results

    def _after_first_looks(
        self,
        governed: list[Governed],
        results: list[Result],
        looked: list[int],
        run: Callable[[Sequence[Governed]], list[Result]],
        eng: Engine,
    ) -> None:
        """Two targets naming one cluster name in a region took a first look (``Governed.looks_first``):
        their accounts are known now, so the fleet is resolved again and the config's order decides, in
        this same tick, which of them acts. One the other target governs is said (``fleet.problems``)."""
        from hyperpod_scheduler.engine.identity import reach_of
        from hyperpod_scheduler.engine.ref import Result

        fleet = self.fleet()
        # A namesake whose look found no cluster of its name cannot be the cluster the other found: it
        # holds nobody back (an AccessDenied or a timeout still does: sameness is not known then).
        absent = frozenset(reach_of(g.ref) for g, r in zip(governed, results, strict=True) if r.no_cluster)
        again = {reach_of(g.ref): g for g in fleet.governed(absent=absent)}
        ready: list[tuple[int, Governed]] = []
        for i in looked:
            reach = reach_of(governed[i].ref)
            g = again.get(reach)
            if g is None:
                why = next((p.why for p in fleet.problems if str(reach) in p.why), "another target governs it")
                results[i] = Result(governed[i].ref.name, "skip", why)
            elif not g.looks_first:
                ready.append((i, g))
            else:  # a namesake's look failed (denied, unanswered): said, so a held stop is not silent
                eng.emit(governed[i].ref, "waiting", results[i].message)
        for (i, g), result in zip(ready, run([g for _, g in ready]) if ready else [], strict=True):
            governed[i], results[i] = g, result

    def lead_for(self, g: Governed) -> Lead:
        """How early a ready-by start is issued for ``g``, and why."""
        from hyperpod_scheduler.engine.fleet import lead_for

        return lead_for(self.engine(), g, self.config.defaults.ready_by)

    def guards_built(
        self, ref: ClusterRef, include_protected: bool = False, side_effects: bool = True
    ) -> list[StopGuard]:
        """The guards a stop of ``ref`` asks, from the settings its own target gave it (``ref.settings``,
        resolved by the fleet): never looked up again here by region and name. ``side_effects`` False:
        without the checkpoint audit (it signals and drains), for a forecast of the stop."""
        from hyperpod_scheduler.guards.approval import ApprovalGuard
        from hyperpod_scheduler.guards.capacity import CapacityGuard

        policy = ref.settings.policy
        guards: list[StopGuard] = [CapacityGuard(policy, include_protected)]
        if policy.approve_release:
            guards.append(ApprovalGuard(policy, self._approvals))
        checkpoints = ref.settings.checkpoints
        if checkpoints is not None:
            if side_effects:
                guards.append(self._checkpoint_guard(ref, checkpoints, policy.keep_slurm_head))
        else:
            from hyperpod_scheduler.guards.coverage import AuditCoverage

            guards.append(AuditCoverage(ref.settings.unaudited))
        return guards

    def _approvals(self, key: str) -> list[Approval]:
        record = self.store.get(key)
        return list(record.approvals) if record else []

    def _checkpoint_guard(self, ref: ClusterRef, settings: CheckpointSettings, keep_head: bool | None) -> StopGuard:
        from hyperpod_scheduler.guards.checkpoints import CheckpointGuard

        link, now = self._agent_link(ref, settings)
        return CheckpointGuard(settings, link, keep_slurm_head=keep_head, now=now)

    def _agent_link(self, ref: ClusterRef, settings: CheckpointSettings) -> tuple[AgentLink, Callable[[], datetime]]:
        """How ``ref``'s Slurm side is reached, and the clock its answers are timed by."""
        from hyperpod_scheduler.agent.worker import SlurmSide
        from hyperpod_scheduler.guards.checkpoints import ChannelLink, LocalLink
        from hyperpod_scheduler.slurm.commands import SubprocessSlurm

        if self.agent is not None:
            return self.agent.link_for(ref, settings), self.agent.now
        if settings.channel:
            # The agent on the controller answers in its own (real) time, whatever clock drives the
            # engine: the wait for it is measured on the wall clock.
            return ChannelLink(self._channel(ref, settings.channel)), _wall_clock
        # No channel: the scheduler runs on the controller, so Slurm's commands are right here.
        return LocalLink(SlurmSide(SubprocessSlurm())), _wall_clock

    def slurm_shape(self, ref: ClusterRef) -> SlurmShape | None:
        """The Slurm agent's latest view of ``ref``'s groups (its controller group, its compute groups),
        through the cluster's own checkpoint channel; None when the cluster has no agent."""
        settings = ref.settings.checkpoints
        if settings is None:
            return None
        link, _ = self._agent_link(ref, settings)
        return link.shape(ref.key)

    def _channel(self, ref: ClusterRef, url: str) -> Channel:
        from hyperpod_scheduler.agent.channel import StoreChannel, open_channel

        if url.startswith("s3://"):
            # In the cluster's account: the CLI's profile, the worker's assumed spoke role.
            return open_channel(url, self.clients.s3(ref))
        with self._lock:  # one store per channel URL, however many clusters and threads use it
            if url not in self._channels:
                store = open_store(url)
                self._channel_stores.append(store)
                self._channels[url] = StoreChannel(store)
            return self._channels[url]

    # ---- what faces show beside ------------------------------------------------------------------
    def prices(self) -> PriceTable:
        """Bundled prices, the Price List API when the config enables it, the user's override file last."""
        if self._prices is None:
            self._prices = resolve_prices(self.config.cost.prices, self.now(), self.clients.pricing)
        return self._prices

    def close(self) -> None:
        if isinstance(self.events, Notifier):  # a Lambda worker returns only once they are out (or given up)
            self.events.close()
        for store in self._channel_stores:
            store.close()
        self._channel_stores.clear()
        self._channels.clear()
