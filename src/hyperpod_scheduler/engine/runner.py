"""The engine: one cluster's turn (identify, decide what is due, take the lease) and the commands a
person gives it (stop, start, follow, hold, claim). Its parts live beside it, one responsibility each:
``acting`` (the send and its answer), ``intents`` (an intent found in the record), ``settling``
(following an update until it settles), ``guard_round`` (the guards before a stop and after a start),
``holds``; every decision comes from ``planner``.

Two runners at once: the compare-and-set on the record lets only one of them store the intent, and the
lease keeps a second runner from re-sending a first runner's intent that is still on its way out.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.aws import answers
from hyperpod_scheduler.aws.clients import no_blind_retries
from hyperpod_scheduler.cluster.view import ClusterView, parse_cluster
from hyperpod_scheduler.config.model import Retry
from hyperpod_scheduler.engine import acting, holds, intents, planner, reads, settling
from hyperpod_scheduler.engine.events import Event, Sink, discard
from hyperpod_scheduler.engine.identity import Accounts, LegacyRead
from hyperpod_scheduler.engine.images import Releases
from hyperpod_scheduler.engine.messages import reach_text
from hyperpod_scheduler.engine.ref import ClusterRef, ClusterSettings, Result
from hyperpod_scheduler.errors import HyperpodSchedulerError, SpecError
from hyperpod_scheduler.guards.base import StopGuard
from hyperpod_scheduler.guards.capacity import CapacityGuard
from hyperpod_scheduler.store.base import lease_owner_id
from hyperpod_scheduler.store.records import ClusterRecord, HistoryEntry, cluster_key

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from hyperpod_scheduler.agent.messages import SlurmShape
    from hyperpod_scheduler.store.base import StateStore


class Engine:
    def __init__(
        self,
        store: StateStore,
        client_for: Callable[[ClusterRef], SageMakerClient],
        now: Callable[[], datetime],
        *,
        events: Sink = discard,
        actor: str = "scheduler",
        settle_timeout: timedelta = timedelta(hours=3),
        sleep: Callable[[float], None] = time.sleep,
        lease_ttl_s: float = 900.0,
        guards_for: Callable[[ClusterRef], Sequence[StopGuard]] | None = None,
        retry: Retry | None = None,
        read_file: Callable[[ClusterRef, str], bytes] | None = None,
        releases: Releases | None = None,
        slurm_shape: Callable[[ClusterRef], SlurmShape | None] | None = None,
        looked: Callable[[ClusterRef, ClusterView, datetime], None] | None = None,
        changing: Callable[[ClusterRef], None] | None = None,
    ) -> None:
        self.store = store
        self.client_for = client_for
        self.now = now
        self.events = events
        self.actor = actor
        self.settle_timeout = settle_timeout
        self.sleep = sleep
        self.owner = lease_owner_id()
        self.retry = retry or Retry()
        # The guards a stop of this cluster asks, built from its own settings (``ref.settings``). With no
        # config at all, the default policy still protects scarce capacity and training plans.
        self.guards_for = guards_for or (lambda ref: [CapacityGuard(ref.settings.policy)])
        self._last_progress: dict[str, str] = {}  # only report progress that changed
        self.lease_ttl_s = lease_ttl_s
        # Reads a cluster's provisioning_parameters.json (s3://...) for its Slurm roles; None: roles that
        # only that file names stay unknown, and the head is kept with any compute kept.
        self.read_file = read_file
        # The Slurm agent's latest view of a cluster's groups (``agent.shape``), for roles neither
        # SlurmConfig nor that file gives; None: no agent is asked.
        self.slurm_shape = slurm_shape
        # The HyperPod AMI releases known for a cluster (engine.images); None: no group changes release.
        self.releases = releases
        # Told of every DescribeCluster answer this engine accepts (the faces' shared cache of looks,
        # app.looks): a tick's own look refreshes what the dashboard shows, at no extra call.
        self.looked = looked
        # Told just before this engine sends a cluster an UpdateCluster (or UpdateClusterSoftware): every
        # answer from before is then of a cluster that may be changing (the faces' looks read it again
        # rather than show it as now).
        self.changing = changing
        self.accounts = Accounts(store, now, self.entry, lambda ref, m: self.emit(ref, "note", m))
        self._plan_groups: dict[tuple[str | None, str | None, str], dict[str, tuple[list[str], str | None]]] = {}
        # Keys whose record watched no training plan when this tick's turn read it: the plan watch after
        # the turn then needs no read of its own (only this engine's own answers add plans to a record).
        self._no_plans: set[str] = set()
        self.reads = reads.Reads()  # this turn's DescribeCluster reads, kept on the record by keep_reads

    # ---- reporting -------------------------------------------------------------------------------
    def emit(self, ref: ClusterRef, kind: Any, message: str, **detail: Any) -> None:
        self.events(Event(self.now(), ref.name, kind, message, detail, where=ref.where))

    def entry(
        self, ref: ClusterRef, action: str, outcome: str, duration_s: float | None = None, **detail: Any
    ) -> HistoryEntry:
        """A history line, written in the same store write as the record change it describes."""
        return HistoryEntry(
            key=ref.key,
            at=self.now(),
            action=action,
            actor=self.actor,
            outcome=outcome,
            duration_s=duration_s,
            detail=detail,
        )

    # ---- AWS edge --------------------------------------------------------------------------------
    def client(self, ref: ClusterRef) -> SageMakerClient:
        # Whoever built the client, its answers are checked before botocore parses them, members the
        # installed model does not know are kept in sight (``aws.answers``), and UpdateCluster is never
        # retried blind: its outcome is decided here.
        client: SageMakerClient = no_blind_retries(answers.watch(self.client_for(ref)))
        return client

    def about_to_change(self, ref: ClusterRef) -> None:
        """Say, before an UpdateCluster or UpdateClusterSoftware goes out, that ``ref`` may now be changing
        (the ``changing`` hook: the faces' looks from before are dropped)."""
        if self.changing is not None:
            self.changing(ref)

    def sagemaker(self, ref: ClusterRef) -> SageMakerClient:
        """The checked client the engine itself uses for this cluster (for read-only watches)."""
        return self.client(ref)

    def plan_groups(self, ref: ClusterRef) -> dict[str, tuple[list[str], str | None]]:
        """Training plans seen on this cluster's groups by this engine's describes: ARN -> (groups, type)."""
        return dict(self._plan_groups.get((ref.region, ref.profile, ref.name), {}))

    def describe(self, ref: ClusterRef) -> ClusterView:
        """The cluster as AWS reports it; an answer from another account than the record's is refused."""
        try:
            answer = self.client(ref).describe_cluster(ClusterName=ref.name)
        except (ClientError, BotoCoreError, HyperpodSchedulerError) as exc:
            if reads.unanswered(exc):
                self.reads.failed(ref, self.now(), exc)  # kept on the record after the turn (engine.reads)
            elif isinstance(exc, ClientError):
                self.reads.answered(ref, self.now())  # AWS answered (an error): reachable, nothing read
            raise
        try:
            view = parse_cluster(answer)  # parse_cluster checks the shape itself
            self.accounts.check(ref, view)
        except HyperpodSchedulerError:  # MalformedAnswer, or the account check's refusal
            # AWS answered (reachable), but not with this cluster's sizes: another account's cluster,
            # or an answer of a shape we refuse. "Sizes as of" stays where it was.
            self.reads.answered(ref, self.now())
            raise
        self.reads.ok(ref, self.now())
        plans: dict[str, tuple[list[str], str | None]] = {}
        for g in view.groups:
            if g.training_plan_arn:
                groups, _ = plans.get(g.training_plan_arn, ([], None))
                plans[g.training_plan_arn] = ([*groups, g.name], g.instance_type)
        if plans:  # for the plan watch: a tick with nothing due makes no DescribeCluster of its own
            self._plan_groups[(ref.region, ref.profile, ref.name)] = plans
        if self.looked is not None:
            self.looked(ref, view, self.now())
        return view

    def keep_reads(self, ref: ClusterRef, *, write: bool = True) -> None:
        """After a cluster's turn: how its reads went, onto its record (``engine.reads``); ``write``
        False (a dry run) forgets them."""
        seen = self.reads.take(ref)
        if write:
            reads.keep(self.store, (self.accounts.known(ref) or ref).key, seen)

    def identify(self, ref: ClusterRef, *, dry_run: bool = False) -> tuple[ClusterRef, ClusterView | None]:
        """``ref`` with its account, learning it from the cluster's ARN on the first look (one
        DescribeCluster per profile, region and name, ever) and giving it the record from before account
        keys if that is its; with the view when a look was needed."""
        known, view, _record = self._identified(ref, self.accounts.known(ref), dry_run)
        return known, view

    def _identified(
        self, ref: ClusterRef, known: ClusterRef | None, dry_run: bool, legacy: LegacyRead | None = None
    ) -> tuple[ClusterRef, ClusterView | None, ClusterRecord | None]:
        """``known``: ``self.accounts.known(ref)``; ``legacy``: when that is None, the record under
        ``ref``'s key from before account keys if the turn has read it already (not read twice)."""
        view = None
        if known is not None:
            record = self.store.get(known.key)
            if record is None and self._old_record_waits(known):
                view = self.describe(known)
                record = self.accounts.adopt(known, view, dry_run=dry_run)
        else:
            view = self.describe(ref)
            known = self.accounts.learn(ref, view, dry_run=dry_run)
            record = self.accounts.adopt(known, view, dry_run=dry_run, legacy=legacy)
        self._note_plan_read(known, record)
        return known, view, record

    def _note_plan_read(self, ref: ClusterRef, record: ClusterRecord | None) -> None:
        # For the plan watch after this turn. No record is no plan too: plans are remembered only from
        # the engine's own DescribeCluster answers, and the watch reads again whenever those name one.
        if record is None or not record.plans:
            self._no_plans.add(ref.key)
        else:
            self._no_plans.discard(ref.key)

    def watched_no_plan(self, ref: ClusterRef) -> bool:
        """True if this tick's turn of ``ref`` (by account) read a record that watches no training plan."""
        return ref.key in self._no_plans

    def record_of(self, ref: ClusterRef) -> ClusterRecord | None:
        """The record of ``ref`` where the engine keeps it (by account, known without an API call), or
        None: not looked at yet through this profile, or nothing recorded."""
        known = self.accounts.known(ref)
        return self.store.get(known.key) if known is not None else None

    def claim(self, ref: ClusterRef) -> str:
        """The user says whose cluster this is: bind ``ref``'s profile to the account it reaches now
        (replacing an earlier binding) and give it the record from before account keys, if one waits."""
        view = self.describe(replace(ref, account=None))
        known = self.accounts.learn(replace(ref, account=None), view, dry_run=False, replace=True)
        before = self.store.get(known.key)
        adopted = self.accounts.adopt(known, view, dry_run=False, force=True)
        moved = adopted is not None and before is None
        return f"{reach_text(known)} is account {known.account}" + (
            f"; the record kept from before account keys is now {known.key}" if moved else ""
        )

    def _old_record_waits(self, ref: ClusterRef) -> bool:
        """A record from before account keys that could still be ``ref``'s (then one look decides)."""
        old = self.store.get(cluster_key(ref.name, ref.region or ""))
        if old is None or ref.account in old.misfits:
            return False  # found not to be this cluster's: no look on every tick
        return old.moved_to in (None, ref.key)

    def fate_now(self, ref: ClusterRef, targets: Mapping[str, int]) -> planner.Fate | None:
        """One look after an unclear answer: did our update go out? None if the look itself failed."""
        try:
            return planner.intent_fate(self.describe(ref), targets)
        except (ClientError, BotoCoreError, HyperpodSchedulerError):
            return None

    # ---- one cluster, one tick -------------------------------------------------------------------
    def reconcile(
        self, ref: ClusterRef, sched: planner.ScheduleState, *, enforced: bool = False, dry_run: bool = False
    ) -> Result:
        """One cluster, one tick. Its own trouble (a damaged record, an answer no parser can read, a bug
        met on its data) raises: ``fleet.caught`` makes it this cluster's ``error`` result, in one place."""
        known = self.accounts.known(ref)
        legacy = None
        if known is None:
            # Never looked at through this profile: decide from the record it had before account
            # keys (if any) whether anything is due at all, so a quiet tick stays without API calls.
            legacy = LegacyRead(ref.key, self.store.get(ref.key))
            old = legacy.record
            if planner.due(old if old and not old.moved_to else None, sched, enforced=enforced, now=self.now()) is None:
                return Result(ref.name, "quiet", "nothing due")
        # A first look's answer serves this pass too; in a dry run the record may be the one it would adopt.
        ref, view, record = self._identified(ref, known, dry_run, legacy)
        self.reads.note(ref, record)  # so keeping this turn's reads needs no read of its own (engine.reads)
        due = planner.due(record, sched, enforced=enforced, now=self.now())
        if due is None:
            return Result(ref.name, "quiet", "nothing due")
        if dry_run:
            pending = record.pending if record is not None else None
            if due.kind == "follow" and pending is not None and pending.phase != "intent":
                return intents.dry(self, ref, f"would follow the {pending.action} in flight")
            return self._reconcile(ref, sched, due, dry_run, enforced, view)
        return self.with_lease(ref, lambda: self._reconcile(ref, sched, due, dry_run, enforced, view))

    def _reconcile(
        self,
        ref: ClusterRef,
        sched: planner.ScheduleState,
        due: planner.Due,
        dry_run: bool,
        enforced: bool,
        view: ClusterView | None = None,
    ) -> Result:
        # The record is read again under the lease (in _act or here), although the turn read it just
        # before to decide what is due: a runner that held the lease in between may have sent a stop,
        # and this turn's guards (draining nodes, the checkpoint audit) must not run on the read from
        # before. The intent's compare-and-set alone would only stop the send, after the guards.
        if due.kind == "follow":
            record = self.store.get(ref.key)
            if record is not None and record.pending is not None and record.pending.phase == "intent":
                return intents.revisit(self, ref, record, sched, enforced, dry_run, view)
            followed = settling.follow(self, ref, wait=False)
            if followed.kind != "in-progress" or dry_run:
                return followed
            # Still settling when the schedule turned the other way (a Continuous start short of capacity
            # at the evening stop): its outcome is recorded as it stands and the new transition goes out
            # now, not at the settle timeout.
            record = self.store.get(ref.key)
            why = planner.overtaken(record, sched, self.now()) if record is not None else None
            if why is None or record is None or not settling.overtake(self, ref, record, why):
                return followed
            after = planner.due(self.store.get(ref.key), sched, enforced=enforced, now=self.now())
            return followed if after is None else acting.act_on(self, ref, sched, after, dry_run)
        return acting.act_on(self, ref, sched, due, dry_run, view=view)

    def act(
        self,
        ref: ClusterRef,
        action: planner.Action,
        *,
        transition_id: str,
        transition_at: datetime | None = None,
        reason: str = "manual",
        dry_run: bool = False,
        wait: bool = False,
        poll_seconds: float = 30.0,
    ) -> Result:
        """Stop or start one cluster now (holding its lease), whatever the schedule says."""
        ref, _ = self.identify(ref, dry_run=dry_run)

        def work() -> Result:
            while True:
                result = acting.act(
                    self,
                    ref,
                    action,
                    transition_id=transition_id,
                    transition_at=transition_at,
                    origin="manual",
                    reason=reason,
                    dry_run=dry_run,
                    wait=wait,
                    poll_seconds=poll_seconds,
                )
                if result.kind != "waiting" or not wait:
                    return result
                self.sleep(poll_seconds)  # deep health checks still running: look again, send again
                if not self.keep_lease(ref):
                    return Result(ref.name, "skip", "lost this cluster's lease while waiting for health checks")

        try:
            if dry_run:
                return work()
            return self.with_lease(
                ref,
                work,
                wait_s=self.lease_ttl_s if wait else 0.0,
                poll_seconds=poll_seconds,
                longer=(lambda: self._followed_elsewhere(ref)) if wait else None,
            )
        finally:
            # How the reads went, onto the record (engine.reads); a store that fails here must not hide
            # what the action did, so its failure is left to the next turn.
            with contextlib.suppress(Exception):
                self.keep_reads(ref, write=not dry_run)

    def raise_groups(self, ref: ClusterRef, counts: Mapping[str, int], *, transition_id: str, reason: str) -> Result:
        """Start only these groups, to these counts (holding the lease; the usual intent and follow)."""
        ref, _ = self.identify(ref)
        return self.with_lease(
            ref,
            lambda: acting.act(
                self, ref, "start", transition_id=transition_id, origin="schedule", reason=reason, raise_to=counts
            ),
        )

    def follow(self, ref: ClusterRef, *, wait: bool, poll_seconds: float = 30.0) -> Result:
        """Follow an update in flight until it settles (``wait``) or for one look."""
        ref, _ = self.identify(ref)
        return self.with_lease(ref, lambda: settling.follow(self, ref, wait=wait, poll_seconds=poll_seconds))

    def set_hold(self, ref: ClusterRef, state: planner.State, until: datetime | None, reason: str = "") -> None:
        holds.set_hold(self, ref, state, until, reason)

    def release(self, ref: ClusterRef) -> bool:
        return holds.release(self, ref)

    def forget(self, ref: ClusterRef) -> dict[str, int] | None:
        return holds.forget(self, ref)

    def allow_image(self, ref: ClusterRef, group: str, release: str | None = None) -> list[str]:
        return holds.allow_image(self, ref, group, release)

    def with_lease(
        self,
        ref: ClusterRef,
        work: Callable[[], Result],
        *,
        wait_s: float = 0.0,
        poll_seconds: float = 30.0,
        longer: Callable[[], bool] | None = None,
    ) -> Result:
        # The record's compare-and-set already stops two runners storing two intents; the lease also
        # stops a second runner from re-sending a first runner's intent that is still on its way out.
        # ``wait_s`` (a manual --wait): look again until the lease is given back or ``wait_s`` has passed
        # (a lease lapses within its TTL even if its holder died, so one TTL is enough). ``longer``: once
        # that has passed, true while waiting on is still right (a live holder following an update in flight).
        step = max(min(poll_seconds, 1.0), 0.01)  # a tick gives it back within seconds
        give_up = self.now() + timedelta(seconds=wait_s)
        looks = math.ceil(wait_s / step)  # also bounded by count: an injected clock may stand still
        while not self.store.acquire_lease(ref.key, self.owner, self.lease_ttl_s, self.now()):
            if looks <= 0 or self.now() >= give_up:
                if longer is None or not longer():
                    message = "another runner holds this cluster's lease; left to it this time"
                    self.emit(ref, "skip", message)
                    return Result(ref.name, "skip", message)
                give_up, looks = self.now() + timedelta(seconds=wait_s), math.ceil(wait_s / step)
            looks -= 1
            self.sleep(step)
        try:
            return work()
        finally:
            self.store.release_lease(ref.key, self.owner)

    # ---- following -------------------------------------------------------------------------------

    def _followed_elsewhere(self, ref: ClusterRef) -> bool:
        """A manual --wait that met a held lease for one whole TTL: the holder is alive (a dead one's
        lease lapses within it), and while the record shows an update of ours in flight it is following
        that update, which takes longer than a TTL. Wait on, until that update's settle timeout."""
        record = self.store.get(ref.key)
        pending = record.pending if record is not None else None
        if pending is None or pending.phase == "intent" or self.now() >= pending.created_at + self.settle_timeout:
            return False
        said = f"another runner follows the {pending.action} under way ({pending.transition_id}); waiting for it"
        if self._last_progress.get(ref.key + "#elsewhere") != said:
            self.emit(ref, "note", said)
            self._last_progress[ref.key + "#elsewhere"] = said
        return True

    def keep_lease(self, ref: ClusterRef) -> bool:
        # A lease that lapsed unclaimed (a slow poll, a suspended laptop) is simply taken again.
        now = self.now()
        return self.store.renew_lease(ref.key, self.owner, self.lease_ttl_s, now) or self.store.acquire_lease(
            ref.key, self.owner, self.lease_ttl_s, now
        )

    # ---- small writes ----------------------------------------------------------------------------

    # ---- manual holds ----------------------------------------------------------------------------


__all__ = ["ClusterRef", "ClusterSettings", "Engine", "Result", "SpecError", "reach_text"]
