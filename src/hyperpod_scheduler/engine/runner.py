"""The imperative shell: describe, remember, send, follow. Every decision comes from ``planner``.

Crash rules (never lose a remembered size; never send one transition twice):
1. The snapshot and a write-ahead ``intent`` are stored (compare-and-set) before UpdateCluster.
2. After AWS accepts the update the intent becomes ``sent``.
3. A re-run that finds ``intent`` compares the cluster's target counts with the intended ones to tell
   whether the call went out, and only re-sends if it did not.
Two runners at once: the compare-and-set on the record lets only one of them store the intent.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.aws import answers
from hyperpod_scheduler.aws.clients import no_blind_retries
from hyperpod_scheduler.cluster.view import ClusterView, parse_cluster
from hyperpod_scheduler.config.model import Policy, Retry
from hyperpod_scheduler.engine import crashpoints, fidelity, phases, planner
from hyperpod_scheduler.engine.events import Event, Sink, discard
from hyperpod_scheduler.engine.identity import Accounts, LegacyRead
from hyperpod_scheduler.engine.look import look
from hyperpod_scheduler.engine.slurm_roles import remember_roles, resolve_roles
from hyperpod_scheduler.engine.update_request import build_update
from hyperpod_scheduler.errors import HyperpodSchedulerError, SpecError
from hyperpod_scheduler.guards.base import StopContext, StopGuard, Verdict
from hyperpod_scheduler.guards.capacity import CapacityGuard
from hyperpod_scheduler.store.base import lease_owner_id
from hyperpod_scheduler.store.errors import ConflictError
from hyperpod_scheduler.store.outcomes import outcomes_detail
from hyperpod_scheduler.store.records import (
    ChecksWait,
    ClusterRecord,
    GroupOutcome,
    HistoryEntry,
    Origin,
    PendingAction,
    Refusal,
    RetryState,
    cluster_key,
    request_digest,
)

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from hyperpod_scheduler.store.base import StateStore


@dataclass(frozen=True)
class ClusterRef:
    """A cluster the engine may act on: its store key, name and where to reach it.

    ``account`` None: not known yet; ``key`` is then where the record was before account keys, and the
    engine learns the account from the cluster's ARN before it reads or writes anything for it.
    ``namesakes``: other profiles the config names a cluster of this name under, in this region."""

    key: str
    name: str
    region: str | None = None
    profile: str | None = None
    account: str | None = None
    namesakes: tuple[str, ...] = ()

    def with_account(self, account: str) -> ClusterRef:
        return replace(self, account=account, key=cluster_key(self.name, self.region or "", account))


@dataclass(frozen=True)
class Result:
    cluster: str
    # skip | noop | sent | dry-run | in-progress | settled | failed | error | quiet | blocked | refused | waiting
    # (waiting: refused while deep health checks run; sent again at the next look, not a failure)
    kind: str
    message: str


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
        policy_for: Callable[[ClusterRef], Policy] | None = None,
        read_file: Callable[[ClusterRef, str], bytes] | None = None,
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
        # With no config at all, the default policy still protects scarce capacity and training plans.
        self.guards_for = guards_for or (lambda ref: [CapacityGuard(Policy())])
        self._last_progress: dict[str, str] = {}  # only report progress that changed
        self.lease_ttl_s = lease_ttl_s
        # The cluster's merged policy: what an update may accept losing, and whether it pins the AMI.
        self.policy_for = policy_for or (lambda ref: Policy())
        # Reads a cluster's provisioning_parameters.json (s3://...) for its Slurm roles; None: roles that
        # only that file names stay unknown, and the head is kept with any compute kept.
        self.read_file = read_file
        self.accounts = Accounts(store, now, self._entry, lambda ref, m: self._emit(ref, "note", m))
        self._plan_groups: dict[tuple[str | None, str | None, str], dict[str, tuple[list[str], str | None]]] = {}
        # Keys whose record watched no training plan when this tick's turn read it: the plan watch after
        # the turn then needs no read of its own (only this engine's own answers add plans to a record).
        self._no_plans: set[str] = set()

    # ---- reporting -------------------------------------------------------------------------------
    def _emit(self, ref: ClusterRef, kind: Any, message: str, **detail: Any) -> None:
        self.events(Event(self.now(), ref.name, kind, message, detail))

    def _entry(
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
    def _client(self, ref: ClusterRef) -> SageMakerClient:
        # Whoever built the client, its answers are checked before botocore parses them, members the
        # installed model does not know are kept in sight (``aws.answers``), and UpdateCluster is never
        # retried blind: its outcome is decided here.
        client: SageMakerClient = no_blind_retries(answers.watch(self.client_for(ref)))
        return client

    def sagemaker(self, ref: ClusterRef) -> SageMakerClient:
        """The checked client the engine itself uses for this cluster (for read-only watches)."""
        return self._client(ref)

    def plan_groups(self, ref: ClusterRef) -> dict[str, tuple[list[str], str | None]]:
        """Training plans seen on this cluster's groups by this engine's describes: ARN -> (groups, type)."""
        return dict(self._plan_groups.get((ref.region, ref.profile, ref.name), {}))

    def describe(self, ref: ClusterRef) -> ClusterView:
        """The cluster as AWS reports it; an answer from another account than the record's is refused."""
        answer = self._client(ref).describe_cluster(ClusterName=ref.name)
        view = parse_cluster(answer)  # parse_cluster checks the shape itself
        self.accounts.check(ref, view)
        plans: dict[str, tuple[list[str], str | None]] = {}
        for g in view.groups:
            if g.training_plan_arn:
                groups, _ = plans.get(g.training_plan_arn, ([], None))
                plans[g.training_plan_arn] = ([*groups, g.name], g.instance_type)
        if plans:  # for the plan watch: a tick with nothing due makes no DescribeCluster of its own
            self._plan_groups[(ref.region, ref.profile, ref.name)] = plans
        return view

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

    def _fate_now(self, ref: ClusterRef, targets: Mapping[str, int]) -> planner.Fate | None:
        """One look after an unclear answer: did our update go out? None if the look itself failed."""
        try:
            return planner.intent_fate(self.describe(ref), targets)
        except (ClientError, BotoCoreError, HyperpodSchedulerError):
            return None

    # ---- one cluster, one tick -------------------------------------------------------------------
    def reconcile(
        self, ref: ClusterRef, sched: planner.ScheduleState, *, enforced: bool = False, dry_run: bool = False
    ) -> Result:
        """One cluster, one tick. Never raises for that cluster's own trouble (a damaged record, an
        answer no parser can read, a bug met on its data): it becomes this cluster's ``error`` result."""
        try:
            known = self.accounts.known(ref)
            legacy = None
            if known is None:
                # Never looked at through this profile: decide from the record it had before account
                # keys (if any) whether anything is due at all, so a quiet tick stays without API calls.
                legacy = LegacyRead(ref.key, self.store.get(ref.key))
                old = legacy.record
                if (
                    planner.due(old if old and not old.moved_to else None, sched, enforced=enforced, now=self.now())
                    is None
                ):
                    return Result(ref.name, "quiet", "nothing due")
            # A first look's answer serves this pass too; in a dry run the record may be the one it would adopt.
            ref, view, record = self._identified(ref, known, dry_run, legacy)
            due = planner.due(record, sched, enforced=enforced, now=self.now())
            if due is None:
                return Result(ref.name, "quiet", "nothing due")
            if dry_run:
                pending = record.pending if record is not None else None
                if due.kind == "follow" and pending is not None and pending.phase != "intent":
                    return self._dry(ref, f"would follow the {pending.action} in flight")
                return self._reconcile(ref, sched, due, dry_run, enforced, view)
            return self._with_lease(ref, lambda: self._reconcile(ref, sched, due, dry_run, enforced, view))
        except Exception as exc:  # contained: one cluster never stops the tick for the others
            return self._failed(ref, exc)

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
                return self._revisit_intent(ref, record, sched, enforced, dry_run, view)
            return self._follow(ref, wait=False)
        return self._act_on(ref, sched, due, dry_run, view=view)

    def _failed(self, ref: ClusterRef, exc: Exception) -> Result:
        message = _describe_error(exc)
        self._emit(ref, "error", message)
        return Result(ref.name, "error", message)

    def _act_on(
        self, ref: ClusterRef, sched: planner.ScheduleState, due: planner.Due, dry_run: bool, **kw: Any
    ) -> Result:
        action: planner.Action = "stop" if due.kind == "stop" else "start"
        if due.kind == "check":
            action = planner.action_for(sched.desired)
        return self._act(
            ref,
            action,
            transition_id=due.transition_id,
            transition_at=due.transition_at,
            origin=due.origin,
            reason=due.reason,
            dry_run=dry_run,
            **kw,
        )

    def _revisit_intent(
        self,
        ref: ClusterRef,
        record: ClusterRecord,
        sched: planner.ScheduleState,
        enforced: bool,
        dry_run: bool,
        view: ClusterView | None = None,
    ) -> Result:
        """An intent stored but never marked sent (a crash, a lost answer): did it go out, and if not,
        is it still what the schedule and the user want now?"""
        pending = record.pending
        assert pending is not None
        view = view or self.describe(ref)
        fate = planner.intent_fate(view, pending.targets)
        if fate == "out":
            if dry_run:
                return self._dry(ref, f"would follow the {pending.action} that had gone out")
            self._mark_sent(ref, record, f"{pending.action} had gone out before an interruption; following it")
            return self._follow(ref, wait=False)
        if fate == "busy":
            return self._someone_else(ref, pending.action, view)
        why = planner.superseded(record, sched, self.now())
        if why is not None:
            if dry_run:
                return self._dry(ref, f"would withdraw the {pending.action} that never went out: {why}")
            self._withdraw(ref, record, why)
            after = self.store.get(ref.key)
            due = planner.due(after, sched, enforced=enforced, now=self.now())
            if due is None:
                return Result(ref.name, "noop", f"withdrew the {pending.action} that never went out: {why}")
            return self._act_on(ref, sched, due, dry_run)
        self._emit(
            ref, "note", f"{pending.action} was interrupted before it went out; planning it again from the cluster now"
        )
        return self._act(
            ref,
            pending.action,
            transition_id=pending.transition_id,
            transition_at=pending.transition_at,
            origin=pending.served_by(),
            reason="resumed",
            dry_run=dry_run,
            replan=True,
            view=view,
        )

    # ---- stop / start ----------------------------------------------------------------------------
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
                result = self._act(
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
                if not self._keep_lease(ref):
                    return Result(ref.name, "skip", "lost this cluster's lease while waiting for health checks")

        if dry_run:
            return work()
        return self._with_lease(ref, work, wait_s=self.lease_ttl_s if wait else 0.0, poll_seconds=poll_seconds)

    def raise_groups(self, ref: ClusterRef, counts: Mapping[str, int], *, transition_id: str, reason: str) -> Result:
        """Start only these groups, to these counts (holding the lease; the usual intent and follow)."""
        ref, _ = self.identify(ref)
        return self._with_lease(
            ref,
            lambda: self._act(
                ref, "start", transition_id=transition_id, origin="schedule", reason=reason, raise_to=counts
            ),
        )

    def follow(self, ref: ClusterRef, *, wait: bool, poll_seconds: float = 30.0) -> Result:
        """Follow an update in flight until it settles (``wait``) or for one look."""
        ref, _ = self.identify(ref)
        return self._with_lease(ref, lambda: self._follow(ref, wait=wait, poll_seconds=poll_seconds))

    def _with_lease(
        self, ref: ClusterRef, work: Callable[[], Result], *, wait_s: float = 0.0, poll_seconds: float = 30.0
    ) -> Result:
        # The record's compare-and-set already stops two runners storing two intents; the lease also
        # stops a second runner from re-sending a first runner's intent that is still on its way out.
        # ``wait_s`` (a manual --wait): look again until the lease is given back or ``wait_s`` has passed
        # (a lease lapses within its TTL even if its holder died, so one TTL is enough).
        step = max(min(poll_seconds, 1.0), 0.01)  # a tick gives it back within seconds
        give_up = self.now() + timedelta(seconds=wait_s)
        looks = math.ceil(wait_s / step)  # also bounded by count: an injected clock may stand still
        while not self.store.acquire_lease(ref.key, self.owner, self.lease_ttl_s, self.now()):
            if looks <= 0 or self.now() >= give_up:
                message = "another runner holds this cluster's lease; left to it this time"
                self._emit(ref, "skip", message)
                return Result(ref.name, "skip", message)
            looks -= 1
            self.sleep(step)
        try:
            return work()
        finally:
            self.store.release_lease(ref.key, self.owner)

    def _act(
        self,
        ref: ClusterRef,
        action: planner.Action,
        *,
        transition_id: str,
        transition_at: datetime | None = None,
        origin: Origin = "manual",
        reason: str = "manual",
        dry_run: bool = False,
        wait: bool = False,
        poll_seconds: float = 30.0,
        replan: bool = False,
        view: ClusterView | None = None,
        raise_to: Mapping[str, int] | None = None,
    ) -> Result:
        """``replan``: the record's pending intent never went out and is replaced by this one.
        ``raise_to``: a start of only these groups, to these counts (``planner.plan_raise``)."""
        record = self.store.get(ref.key)
        if record is not None and record.pending is not None and not replan:
            earlier = self._earlier(ref, record, action, dry_run, wait, poll_seconds)
            if earlier is not None:
                return earlier
            record = self.store.get(ref.key)
            view = None
        view = view or self.describe(ref)
        read = self.read_file
        roles = resolve_roles(view, record, None if read is None else lambda uri: read(ref, uri), self.now())
        view = roles.view
        if roles.note:
            self._emit(ref, "note", roles.note)
        if roles.record_change is not None and not dry_run:
            record = remember_roles(self.store, ref.key, record, roles, partial(self._entry, ref))
        now = self.now()
        policy = self.policy_for(ref)
        refused = fidelity.refusal(view, policy)
        if refused is not None:
            return self._refuse(ref, record, action, refused, view, transition_at or now, dry_run)
        for u in view.unknown_members:  # all accepted by the policy, or refusal would have said so
            self._emit(ref, "note", f"accepting the loss of {u.path} (policy accept_unknown_members)", member=u.path)
        if raise_to is not None:
            plan = planner.plan_raise(view, raise_to)
        elif action == "stop":
            plan = planner.plan_stop(view, record, now, transition_id)
        else:
            plan = planner.plan_start(view, record)
        if isinstance(plan, planner.Skip):
            self._emit(ref, "skip", plan.reason)
            return Result(ref.name, "skip", plan.reason)
        if isinstance(plan, planner.Noop):
            return self._noop(ref, record, action, plan, transition_at or now, dry_run)
        if action == "stop":
            guarded = self._guard(ref, record, view, plan, transition_at or now, dry_run, origin)
            if isinstance(guarded, Result):
                return guarded
            if isinstance(guarded, planner.Noop):
                kept = _everything_kept(view)
                return self._noop(ref, record, action, guarded, transition_at or now, dry_run, kept)
            plan = guarded
        request = build_update(view, plan.counts, policy)
        targets = {name: count for name, (count, _) in plan.counts.items()}
        for note in plan.notes:
            self._emit(ref, "note", note)
        if dry_run:
            self._emit(ref, "dry-run", f"would {action}: {_fmt_targets(view, targets)}", request=request)
            return Result(ref.name, "dry-run", f"would {action}")
        base = record or ClusterRecord.new(ref.key, now)
        pending = PendingAction(
            transition_id=transition_id,
            action=action,
            phase="intent",
            request_digest=request_digest(request),
            created_at=now,
            updated_at=now,
            targets=targets,
            transition_at=transition_at or now,
            origin=origin,
        )
        changes: dict[str, Any] = {"pending": pending, "updated_at": now, "refused": None}
        if plan.snapshot is not None:
            changes["snapshot"] = plan.snapshot
        try:
            stored = self.store.put(base.evolve(**changes), expected_version=record.version if record else None)
        except ConflictError:
            self._emit(ref, "skip", "another runner is acting on this cluster")
            return Result(ref.name, "skip", "another runner is acting on this cluster")
        crashpoints.reached("after-intent")
        if plan.snapshot is not None:
            sizes = {n: s.count for n, s in plan.snapshot.sizes.items()}
            self._emit(ref, "note", f"recorded sizes {sizes}", sizes=sizes)
        return self._send(ref, stored, view, request, action, targets, reason, wait, poll_seconds)

    def _refuse(
        self,
        ref: ClusterRef,
        record: ClusterRecord | None,
        action: planner.Action,
        reason: str,
        view: ClusterView,
        at: datetime,
        dry_run: bool,
    ) -> Result:
        """No update may go to this cluster: say so, remember it for `status`, and consume the transition
        (as a blocked stop does) so a schedule does not retry it every tick; the next one tries again."""
        members = [u.as_dict() for u in fidelity.unaccepted_members(view, self.policy_for(ref))]
        self._emit(ref, "refused", f"{action} refused: {reason}", members=members)
        if not dry_run:
            stays: planner.State = "running" if action == "stop" else "stopped"
            line = self._entry(ref, action, "refused", reason=reason, members=members)
            now = self.now()
            base = record or ClusterRecord.new(ref.key, now)
            with contextlib.suppress(ConflictError):
                self.store.put(
                    base.evolve(
                        applied_state=stays if base.applied_state is None else base.applied_state,
                        applied_transition_at=at,
                        refused=Refusal(at=now, action=action, reason=reason),
                        pending=None,  # an unsent intent being planned again is dropped with it
                        updated_at=now,
                    ),
                    expected_version=record.version if record else None,
                    history=[line],
                )
        return Result(ref.name, "refused", reason)

    def _earlier(
        self, ref: ClusterRef, record: ClusterRecord, action: planner.Action, dry_run: bool, wait: bool, poll: float
    ) -> Result | None:
        """A manual command finds an earlier update: follow it if it went out, withdraw it if it did not
        (the command is the newest word: a manual start never sends an earlier stop), or wait when
        someone else's update runs. None: go on with the command."""
        pending = record.pending
        assert pending is not None
        if pending.phase == "intent":
            view = self.describe(ref)
            fate = planner.intent_fate(view, pending.targets)
            if fate == "busy":
                return self._someone_else(ref, pending.action, view)
            if fate == "unsent":
                if dry_run:
                    return self._dry(ref, f"would withdraw the {pending.action} that never went out, then {action}")
                self._withdraw(ref, record, f"superseded by a manual {action}")
                return None
            if dry_run:
                return self._dry(ref, f"would follow the {pending.action} that had gone out first")
            record = self._mark_sent(ref, record, f"{pending.action} had gone out before an interruption")
        elif dry_run:
            return self._dry(ref, f"would follow the {pending.action} in flight first")
        self._emit(ref, "note", f"an earlier {pending.action} is still settling; following it first")
        result = self._follow(ref, wait=True, poll_seconds=poll) if wait else self._follow(ref, wait=False)
        return result if result.kind in ("in-progress", "skip") else None

    def _someone_else(self, ref: ClusterRef, action: str, view: ClusterView) -> Result:
        message = (
            f"the {action} stored before an interruption never went out and {view.busy_reason()} with other "
            "targets (someone else's update): it waits, and is decided once that settles"
        )
        self._emit(ref, "skip", message)
        return Result(ref.name, "in-progress", message)

    def _dry(self, ref: ClusterRef, message: str) -> Result:
        self._emit(ref, "dry-run", message)
        return Result(ref.name, "dry-run", message)

    def _mark_sent(self, ref: ClusterRef, record: ClusterRecord, note: str) -> ClusterRecord:
        pending = record.pending
        assert pending is not None
        self._emit(ref, "note", note)
        # Not durable on its own (see _send): found again from the cluster's targets if it is lost.
        return self.store.put(
            record.evolve(pending=pending.evolve(phase="sent", updated_at=self.now()), updated_at=self.now()),
            expected_version=record.version,
            durable=False,
        )

    def _withdraw(self, ref: ClusterRef, record: ClusterRecord, why: str) -> None:
        """Drop an intent that never went out; its history line says what superseded it."""
        pending = record.pending
        assert pending is not None
        line = self._entry(ref, pending.action, "withdrawn", reason=why, transition=pending.transition_id)
        self.store.put(
            record.evolve(pending=None, updated_at=self.now()), expected_version=record.version, history=[line]
        )
        crashpoints.reached("after-withdraw")
        self._emit(ref, "note", f"withdrew the {pending.action} that never went out: {why}")

    def _noop(
        self,
        ref: ClusterRef,
        record: ClusterRecord | None,
        action: planner.Action,
        noop: planner.Noop,
        at: datetime,
        dry_run: bool,
        detail: Mapping[str, Any] | None = None,
    ) -> Result:
        """Nothing to send: remember the state as applied (so the transition is not retried) and say why."""
        if not dry_run:
            line = self._entry(ref, action, "noop", reason=noop.reason, **(detail or {}))
            self._mark_applied(ref, record, noop.state, at, line)
        self._emit(ref, "noop", noop.reason)
        return Result(ref.name, "noop", noop.reason)

    def _guard(
        self,
        ref: ClusterRef,
        record: ClusterRecord | None,
        view: ClusterView,
        plan: planner.Send,
        transition_at: datetime,
        dry_run: bool,
        origin: Origin = "manual",
    ) -> planner.Send | planner.Noop | Result:
        """Ask every guard about this stop: a block skips it (until the next transition), keeps leave groups up."""
        ctx = StopContext(
            cluster=ref.name,
            key=ref.key,
            region=ref.region,
            view=view,
            groups_to_zero=tuple(n for n, (c, _) in plan.counts.items() if c == 0 and view.targets().get(n, 0) > 0),
            now=self.now(),
            dry_run=dry_run,
            transition_at=transition_at,
            origin=origin,
        )
        guards = list(self.guards_for(ref))
        # Guards with side effects (the checkpoint guard signals, drains and requeues on allow) run last,
        # only if every other guard allowed, and only on the groups that really go to zero.
        plain = [g for g in guards if not getattr(g, "side_effects", False)]
        acting = [g for g in guards if getattr(g, "side_effects", False)]
        floors: dict[str, int] = {}
        for batch in (plain, acting):
            if batch is acting:
                ctx = replace(ctx, groups_to_zero=tuple(n for n in ctx.groups_to_zero if n not in floors))
            verdicts = [self._ask(guard, ctx) for guard in batch]
            blocked = [v for v in verdicts if v.decision == "block"]
            if blocked:
                reason = "; ".join(f"{v.guard}: {v.reason}" for v in blocked)
                self._emit(ref, "blocked", f"stop blocked: {reason}", guards=[v.guard for v in blocked])
                if not dry_run:
                    line = self._entry(
                        ref, "stop", "blocked", reason=reason, verdicts=[_verdict_detail(v) for v in blocked]
                    )
                    self._mark_applied(ref, record, "running", transition_at, line)
                return Result(ref.name, "blocked", reason)
            for v in verdicts:
                if v.decision == "keep":
                    self._emit(ref, "note", f"{v.guard}: {v.reason}")
                    for group, count in v.floors.items():
                        floors[group] = max(floors.get(group, 0), count)
                elif v.detail and batch is acting:
                    self._emit(ref, "note", f"{v.guard}: {v.reason}", **{"verdict": _verdict_detail(v)})
        return planner.apply_floors(plan, view, floors)

    @staticmethod
    def _ask(guard: StopGuard, ctx: StopContext) -> Verdict:
        try:
            return guard.before_stop(ctx)
        except Exception as exc:  # a check that cannot run must not let instances be terminated
            return Verdict(guard.name, "block", f"guard {guard.name} failed: {exc}")

    def _after_start(self, ref: ClusterRef, view: ClusterView, expected: Mapping[str, int]) -> bool:
        """Let guards with a Slurm side resume what a stop drained and report readiness (nodes idle in
        Slurm). True when a Slurm agent said the restored nodes joined."""
        joined = False
        for guard in self.guards_for(ref):
            after = getattr(guard, "after_start", None)
            if after is None:
                continue
            try:
                answer = after(ref.key, view, dict(expected))
            except Exception as exc:
                self._emit(ref, "error", f"{guard.name}: after start: {exc}")
                continue
            if answer is None:
                self._emit(ref, "note", f"{guard.name}: the Slurm agent did not answer after the start")
            else:
                ready = getattr(answer, "ready", None)
                joined = joined or bool(ready)
                self._emit(ref, "note" if ready else "failed", f"{guard.name}: {getattr(answer, 'reason', '')}")
        return joined

    def _send(
        self,
        ref: ClusterRef,
        record: ClusterRecord,
        view: ClusterView,
        request: Mapping[str, Any],
        action: planner.Action,
        targets: Mapping[str, int],
        reason: str,
        wait: bool,
        poll_seconds: float,
    ) -> Result:
        try:
            self._client(ref).update_cluster(**request)
        except ClientError as exc:
            err = exc.response.get("Error", {})
            code = err.get("Code", "")
            answer = f"{code}: {err.get('Message', '')}"
            # A refusal may also be what a retry met after the first attempt was applied: look first.
            fate = None if code == "ResourceNotFound" else self._fate_now(ref, targets)
            if fate != "out":
                if code in _CHECK_REFUSALS and fate is not None and _health_checks_running(err):
                    return self._checks_wait(ref, record, action, answer)
                if code in _REFUSALS and (fate is not None or code == "ResourceNotFound"):
                    # Not accepted: nothing is in flight, so the intent is withdrawn (the snapshot stays),
                    # and anything a guard drained for this stop is given back.
                    message = f"UpdateCluster refused: {answer}"
                    self._clear_pending(ref, record, self._entry(ref, action, "refused", error=message))
                    if action == "stop":
                        self._after_start(ref, view, view.targets())
                    kind = "skip" if code == "ConflictException" else "error"
                    self._emit(ref, kind, message)
                    return Result(ref.name, kind, message)
                return self._unknown(ref, action, f"UpdateCluster answered {answer}")
            self._emit(
                ref,
                "note",
                f"UpdateCluster answered {answer}, but the cluster is at this {action}'s targets: "
                "it went out (an earlier attempt was applied)",
            )
        except BotoCoreError as exc:
            if self._fate_now(ref, targets) != "out":
                return self._unknown(ref, action, f"UpdateCluster: {exc}")
            self._emit(ref, "note", f"UpdateCluster: {exc}; the cluster is at this {action}'s targets: it went out")
        crashpoints.reached("after-send")
        pending = record.pending
        assert pending is not None
        now = self.now()
        sent = pending.evolve(phase="sent", updated_at=now)
        if action == "start":
            checks = {g.name: bool(g.details.get("OnStartDeepHealthChecks")) for g in view.groups}
            sent = sent.evolve(phases=phases.begin(targets, view.currents(), checks, now))
        waited = record.checks_wait
        # The "sent" mark need not be fsynced: lost with a power loss, it is what a crash at after-send
        # leaves (the intent, whose fate the next look reads from the cluster's target counts), so a
        # transition costs two durable commits, its intent and its outcome (docs/reliability.md). A start's
        # mark also carries the start of its phases (engine/phases): lost, that one start is followed and
        # timed as a whole, without its per-group phases; no size and no transition depends on them.
        record = self.store.put(
            record.evolve(pending=sent, checks_wait=None, updated_at=now),
            expected_version=record.version,
            durable=False,
        )
        crashpoints.reached("after-sent")
        if waited is not None:
            self._emit(
                ref,
                "note",
                f"{action} sent after waiting {_fmt_duration((now - waited.since).total_seconds())} "
                "for deep health checks",
            )
        self._emit(ref, "sent", f"{action} sent ({reason}): {_fmt_targets(view, targets)}", targets=dict(targets))
        if wait:
            return self._follow(ref, wait=True, poll_seconds=poll_seconds)
        return Result(ref.name, "sent", f"{action} sent")

    def _unknown(self, ref: ClusterRef, action: planner.Action, why: str) -> Result:
        """The call may or may not have gone out: the intent stays, and the next look decides from the
        cluster's target counts whether to follow it or to plan again (never re-sent blind)."""
        message = f"{why}; whether the {action} went out is decided at the next look from the cluster's target counts"
        self._emit(ref, "error", message)
        return Result(ref.name, "error", message)

    # ---- following -------------------------------------------------------------------------------
    def _follow(self, ref: ClusterRef, *, wait: bool, poll_seconds: float = 30.0) -> Result:
        while True:
            record = self.store.get(ref.key)
            if record is None or record.pending is None:
                return Result(ref.name, "noop", "nothing in flight")
            pending = record.pending
            targets = dict(pending.targets)
            kept = record.snapshot.kept if record.snapshot is not None and pending.action == "stop" else {}
            view = self.describe(ref)
            if pending.phase == "intent":
                fate = planner.intent_fate(view, targets)
                if fate == "unsent":
                    message = f"the {pending.action} never went out; the next tick decides whether it is still wanted"
                    self._emit(ref, "skip", message)
                    return Result(ref.name, "skip", message)
                if fate == "busy":
                    return self._someone_else(ref, pending.action, view)
                self._mark_sent(ref, record, f"{pending.action} had gone out before an interruption; following it")
                continue
            if pending.action == "start" and pending.phases:
                record = self._look(ref, record, view)
                assert record.pending is not None
                pending = record.pending
            verdict = planner.assess(
                view, pending.action, targets, pending.created_at, self.now(), self.settle_timeout, kept
            )
            if isinstance(verdict, planner.Settled):
                crashpoints.reached("before-settle")
                return self._settle(ref, record, verdict, view)
            # Reported when the verdict, the phases or any group's count or status moves (a live
            # display follows it).
            line = verdict.detail
            if pending.phases:
                types = {g.name: g.instance_type for g in view.groups}
                line = phases.progress(pending.phases, self.now(), types)
            said = line.split(": ", 1)[-1] if pending.phases else line  # the time alone is no news
            seen = f"{said}|{view.currents()}|{[g.status for g in view.groups]}"
            if seen != self._last_progress.get(ref.key):
                self._emit(
                    ref,
                    "progress",
                    f"{pending.action}: {line}",
                    counts=view.currents(),
                    target_counts=targets,
                    statuses={g.name: g.status for g in view.groups},
                    **(
                        {"phases": {g: p.model_dump(mode="json") for g, p in pending.phases.items()}}
                        if pending.phases
                        else {}
                    ),
                )
                self._last_progress[ref.key] = seen
            if not wait:
                return Result(ref.name, "in-progress", verdict.detail)
            self.sleep(poll_seconds)
            crashpoints.reached("while-following")
            if not self._keep_lease(ref):
                message = "lost this cluster's lease while waiting; another runner follows it now"
                self._emit(ref, "skip", message)
                return Result(ref.name, "skip", message)

    def _look(self, ref: ClusterRef, record: ClusterRecord, view: ClusterView) -> ClusterRecord:
        """Bring the start's phases up to date from one look at its nodes and events (never fatal:
        a look that fails leaves the phases as they were)."""
        pending = record.pending
        assert pending is not None
        try:
            seen = look(self._client(ref), view, pending.created_at, self.now())
        except Exception as exc:  # phases are for seeing; following the start must go on without them
            self._emit(ref, "note", f"phases not updated: {_describe_error(exc)}")
            return record
        if seen.note and seen.note != self._last_progress.get(ref.key + "#look"):
            self._emit(ref, "note", f"phases: {seen.note}")
            self._last_progress[ref.key + "#look"] = seen.note
        updated = phases.advance(pending.phases, seen)
        if updated == pending.phases:
            return record
        try:
            # Not fsynced: a phase seen is telemetry (lost with a power loss, it is seen again or missed).
            return self.store.put(
                record.evolve(pending=pending.evolve(phases=updated), updated_at=self.now()),
                expected_version=record.version,
                durable=False,
            )
        except ConflictError:
            return self.store.get(ref.key) or record

    def _checks_wait(self, ref: ClusterRef, record: ClusterRecord, action: planner.Action, answer: str) -> Result:
        """UpdateCluster refused while deep health checks run: not a failure. The intent is withdrawn
        (nothing went out) and the same transition is sent again at the next look, until the settle
        timeout after the first refusal; then it is a failure."""
        pending = record.pending
        assert pending is not None
        now = self.now()
        earlier = record.checks_wait
        if earlier is not None and earlier.transition_id == pending.transition_id and earlier.action == action:
            wait = earlier.evolve(attempts=earlier.attempts + 1)
        else:
            wait = ChecksWait(transition_id=pending.transition_id, action=action, since=now)
        waited = (now - wait.since).total_seconds()
        if now - wait.since >= self.settle_timeout:
            message = (
                f"{action} still refused after {_fmt_duration(waited)} of deep health checks "
                f"(settle timeout {_fmt_duration(self.settle_timeout.total_seconds())}): {answer}"
            )
            line = self._entry(ref, action, "failed", waited, error=message, attempts=wait.attempts)
            updated = record.evolve(
                pending=None, checks_wait=None, applied_transition_at=pending.transition_at, updated_at=now
            )
            with contextlib.suppress(ConflictError):
                self.store.put(updated, expected_version=record.version, history=[line])
            self._emit(ref, "failed", message)
            return Result(ref.name, "failed", message)
        message = (
            f"{action} waits: deep health checks are in progress (attempt {wait.attempts}); sent again at the next look"
        )
        history = []
        if wait.attempts == 1:  # one line per wait, not one per look
            history = [self._entry(ref, action, "waiting", error=answer, reason="deep health checks in progress")]
        with contextlib.suppress(ConflictError):
            self.store.put(
                record.evolve(pending=None, checks_wait=wait, updated_at=now),
                expected_version=record.version,
                history=history,
            )
        self._emit(ref, "waiting", message)
        return Result(ref.name, "waiting", message)

    def _keep_lease(self, ref: ClusterRef) -> bool:
        # A lease that lapsed unclaimed (a slow poll, a suspended laptop) is simply taken again.
        now = self.now()
        return self.store.renew_lease(ref.key, self.owner, self.lease_ttl_s, now) or self.store.acquire_lease(
            ref.key, self.owner, self.lease_ttl_s, now
        )

    def _settle(self, ref: ClusterRef, record: ClusterRecord, verdict: planner.Settled, view: ClusterView) -> Result:
        pending = record.pending
        assert pending is not None
        seen = dict(pending.phases)
        # Ready means joined Slurm and idle, not just Running in the API: ask before timing the start.
        if (
            pending.action == "start"
            and verdict.ok
            and self._after_start(ref, view, {o.group: o.current for o in verdict.outcomes})
        ):
            seen = phases.joined_slurm(seen, self.now())
        now = self.now()
        duration = (now - pending.created_at).total_seconds()
        applied_at: datetime | None = pending.transition_at or now
        if pending.served_by() == "hold" and planner.effective_hold(record, now) is None:
            # Released (or lapsed) while its update was in flight: the schedule decides from here on, as
            # release promised, rather than this moment counting as the schedule's latest transition.
            applied_at = None
        updated = record.evolve(
            pending=None,
            applied_state=verdict.state,
            applied_transition_at=applied_at,
            last_outcomes=list(verdict.outcomes),
            updated_at=now,
        )
        if pending.action == "start" and verdict.ok:
            updated = updated.add_start_duration(duration, now, phases.ready_durations(seen)).evolve(retry=None)
        changes = (
            fidelity.ami_changes(record.snapshot.sizes, view) if record.snapshot and pending.action == "start" else []
        )
        if pending.action == "start":
            updated = updated.evolve(ami_changes=changes)
        retry_note = ""
        if pending.action == "start" and not verdict.ok and _rolled_back(verdict):
            retry = self._next_retry(record, pending.transition_id, verdict.detail, now)
            updated = updated.evolve(retry=retry)
            retry_note = (
                f"; retry {retry.attempt} at {retry.next_at:%H:%M}Z (until {retry.deadline:%H:%M}Z)"
                if retry
                else "; retries exhausted"
            )
        if pending.action == "stop":
            updated = updated.evolve(retry=None)
        outcomes = outcomes_detail(verdict.outcomes)
        kind = "settled" if verdict.ok else "failed"
        extra: dict[str, Any] = {}
        if pending.action == "stop" and record.snapshot is not None:
            # What this night held back, for cost reports (the record's snapshot may change later).
            extra["sizes"] = {
                n: {"count": sz.count, "instance_type": sz.instance_type} for n, sz in record.snapshot.sizes.items()
            }
            extra["kept"] = dict(record.snapshot.kept)
        line = self._entry(
            ref,
            pending.action,
            "ok" if verdict.ok else "failed",
            duration,
            outcomes=outcomes,
            message=verdict.detail,
            **extra,
            **({"ami_changes": [c.model_dump() for c in changes]} if changes else {}),
            **({"phases": {g: p.model_dump(mode="json") for g, p in seen.items()}} if seen else {}),
        )
        self.store.put(updated, expected_version=record.version, history=[line])
        crashpoints.reached("after-settle")
        groups = ", ".join(f"{o.group} {o.outcome} {o.current}/{o.target}" for o in verdict.outcomes)
        how = "settled" if verdict.ok else f"did not settle ({verdict.detail}{retry_note})"
        said = f"{pending.action} {how} after {_fmt_duration(duration)}: {groups}"
        due = pending.transition_at
        readiness: dict[str, Any] = {}
        if pending.action == "start" and verdict.ok and due is not None and pending.served_by() != "manual":
            # Ready when the schedule's day began, or how long after it (a ready-by start is meant to be early).
            spare = (due - now).total_seconds()
            readiness = {"ready_for": {"at": due.isoformat(), "spare_s": spare}}
            said += (
                f"; ready {_fmt_duration(spare)} before {due:%a %H:%M}Z"
                if spare >= 0
                else f"; ready {_fmt_duration(-spare)} after {due:%a %H:%M}Z"
            )
        if seen:
            types = {g.name: g.instance_type for g in view.groups}
            passed = any(p.durations_s() for p in seen.values())
            said += f" [{phases.progress(seen, now, types)}" + (f"; phases {phases.summary(seen)}]" if passed else "]")
        self._emit(
            ref,
            kind,
            said,
            outcomes=outcomes,
            **({"phases": {g: p.model_dump(mode="json") for g, p in seen.items()}} if seen else {}),
            **readiness,
        )
        if changes:
            self._emit(ref, "drift", fidelity.describe_changes(changes), ami_changes=[c.model_dump() for c in changes])
        return Result(ref.name, kind, verdict.detail)

    def _next_retry(self, record: ClusterRecord, transition_id: str, reason: str, now: datetime) -> RetryState | None:
        """Backoff for a start that rolled back: None once the deadline would pass."""
        base = transition_id.split("#retry")[0]
        previous = record.retry if record.retry is not None and record.retry.transition_id == base else None
        attempt = previous.attempt + 1 if previous else 1
        deadline = previous.deadline if previous else now + timedelta(minutes=self.retry.deadline_minutes)
        steps = self.retry.backoff_minutes or [10.0]
        next_at = now + timedelta(minutes=steps[min(attempt - 1, len(steps) - 1)])
        if next_at > deadline:
            return None
        return RetryState(transition_id=base, attempt=attempt, next_at=next_at, deadline=deadline, reason=reason[:200])

    # ---- small writes ----------------------------------------------------------------------------
    def _mark_applied(
        self, ref: ClusterRef, record: ClusterRecord | None, state: planner.State, at: datetime, line: HistoryEntry
    ) -> None:
        now = self.now()
        base = record or ClusterRecord.new(ref.key, now)
        # A conflict means another runner recorded the same conclusion (and its own history line).
        with contextlib.suppress(ConflictError):
            self.store.put(
                base.evolve(applied_state=state, applied_transition_at=at, pending=None, updated_at=now),
                expected_version=record.version if record else None,
                history=[line],
            )

    def _clear_pending(self, ref: ClusterRef, record: ClusterRecord, line: HistoryEntry) -> None:
        with contextlib.suppress(ConflictError):
            self.store.put(
                record.evolve(pending=None, updated_at=self.now()), expected_version=record.version, history=[line]
            )

    # ---- manual holds ----------------------------------------------------------------------------
    def set_hold(self, ref: ClusterRef, state: planner.State, until: datetime | None, reason: str = "") -> None:
        from hyperpod_scheduler.store.records import Hold

        ref, _ = self.identify(ref)
        now = self.now()

        def change(rec: ClusterRecord | None) -> ClusterRecord:
            base = rec or ClusterRecord.new(ref.key, now)
            return base.evolve(hold=Hold(state=state, until=until, by=self.actor, reason=reason), updated_at=now)

        line = self._entry(ref, "hold", "ok", state=state, until=until.isoformat() if until else None, reason=reason)
        self._update(ref, change, line)

    def release(self, ref: ClusterRef) -> bool:
        ref, _ = self.identify(ref)
        now = self.now()
        record = self.store.get(ref.key)
        if record is None or record.hold is None:
            return False
        # The schedule resumes: the next tick applies whatever the schedule wants now.
        self._update(
            ref,
            lambda rec: (rec or ClusterRecord.new(ref.key, now)).evolve(
                hold=None, applied_transition_at=None, updated_at=now
            ),
            self._entry(ref, "release", "ok"),
        )
        return True

    def _update(
        self, ref: ClusterRef, change: Callable[[ClusterRecord | None], ClusterRecord], line: HistoryEntry
    ) -> ClusterRecord:
        for _ in range(10):
            record = self.store.get(ref.key)
            try:
                return self.store.put(
                    change(record), expected_version=record.version if record else None, history=[line]
                )
            except ConflictError:
                continue
        raise HyperpodSchedulerError(f"cluster '{ref.name}': the state store kept changing; try again")


_REFUSALS = ("ConflictException", "ValidationException", "ResourceNotFound")
# The guide documents the refusal's wording, not its code: accept either of the two that fit.
_CHECK_REFUSALS = ("ConflictException", "ValidationException")


def _health_checks_running(err: Mapping[str, Any]) -> bool:
    text = str(err.get("Message", "")).lower()
    return "health check" in text and "in progress" in text


def reach_text(ref: ClusterRef) -> str:
    who = f"profile '{ref.profile}'" if ref.profile else "the default credentials"
    return f"cluster '{ref.name}' in {ref.region} through {who}"


def _verdict_detail(v: Verdict) -> dict[str, Any]:
    return {"guard": v.guard, "decision": v.decision, "reason": v.reason, **{k: v.detail[k] for k in v.detail}}


def _everything_kept(view: ClusterView) -> dict[str, Any]:
    """A stop whose every group with nodes is protected sends nothing; its line still says what stayed
    up, in a settled stop's shape, so the cost report can show what such a night costs (kept, not saved)."""
    kept = [
        GroupOutcome(group=g.name, outcome="kept" if g.target else "stopped", current=g.current, target=g.target)
        for g in view.groups
    ]
    sizes = {g.name: {"count": max(g.current, g.target), "instance_type": g.instance_type} for g in view.groups}
    return {"outcomes": outcomes_detail(kept), "sizes": sizes}


def _rolled_back(verdict: planner.Settled) -> bool:
    """An all-or-nothing rollback (retry it); a Continuous group still short keeps retrying in HyperPod."""
    return any(o.outcome == "failed" for o in verdict.outcomes)


def _fmt_targets(view: ClusterView, targets: Mapping[str, int]) -> str:
    parts = []
    for g in view.groups:
        if g.name in targets:
            parts.append(f"{g.name} {g.target}->{targets[g.name]}")
    return ", ".join(parts)


def _fmt_duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _describe_error(exc: Exception) -> str:
    """One line for any failure met on one cluster, including ones nobody foresaw."""
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        text = f"{err.get('Code', 'Error')}: {err.get('Message', '')}"
    elif isinstance(exc, BotoCoreError | HyperpodSchedulerError):
        text = str(exc)
    else:  # a parser or a guard tripping over this cluster's data: say what, keep going
        text = f"unexpected {type(exc).__name__}: {exc}"
    return " ".join(text.split())


__all__ = ["ClusterRef", "Engine", "Result", "SpecError"]
