"""The fleet: which clusters the config governs, with which schedule, and one reconcile pass over them.

Named clusters cost no API call on a quiet tick. Tag-selected clusters need ListClusters and ListTags
to be found; that discovery is the only read a quiet tick makes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.agent.settings import CheckpointSettings
from hyperpod_scheduler.aws.clients import default_region
from hyperpod_scheduler.aws.pages import Pages
from hyperpod_scheduler.config.model import (
    SCHEDULE_TAG,
    ClusterEntry,
    Config,
    Policy,
    ReadyBy,
    Target,
    merge_policies,
)
from hyperpod_scheduler.engine import image_approval
from hyperpod_scheduler.engine.approvals import ask_if_due, lapse_due
from hyperpod_scheduler.engine.events import Event
from hyperpod_scheduler.engine.identity import arn_account, reach_of
from hyperpod_scheduler.engine.messages import error_text
from hyperpod_scheduler.engine.plan_watch import watch_plans
from hyperpod_scheduler.engine.planner import Action, ScheduleState
from hyperpod_scheduler.engine.readiness import Lead, cluster_lead, histories, lead_time
from hyperpod_scheduler.engine.ref import ClusterRef, ClusterSettings, ImagePolicy, Result
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError
from hyperpod_scheduler.schedule import Schedule, load_schedules, resolve
from hyperpod_scheduler.store.records import Reach, cluster_key

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient


@dataclass(frozen=True)
class Skipped:
    """A cluster or a whole target left out of this pass, and why (one line)."""

    where: str  # "cluster 'bad'" or "targets[0] (us-east-1)"
    why: str
    cluster: str | None = None
    cause: Exception | None = field(default=None, compare=False, repr=False)  # for a face that re-raises

    def __str__(self) -> str:
        return f"{self.where} skipped: {self.why}"


@dataclass(frozen=True)
class Governed:
    """A cluster under a schedule; its settings travel on its reference (``ref.settings``)."""

    ref: ClusterRef
    schedule_label: str
    schedule: Schedule
    enforced: bool
    # Another target names a cluster of this name in this region and the account of one of the two (this
    # one, or one before it in the config) is not known yet: they may be one cluster, which the first of
    # them in the config governs. Until that is known, this turn only looks (learns the account) and
    # acts in no one's name: the turns' order or a race between them must never pick the policy.
    looks_first: bool = False

    @property
    def policy(self) -> Policy:
        return self.ref.settings.policy


def _allowed(schedule: Schedule) -> frozenset[Action]:
    actions: tuple[Action, ...] = ("stop", "start")
    return frozenset(a for a in actions if schedule.allows(a))


def schedule_state(schedule: Schedule, now: datetime, lead: timedelta | None = None) -> ScheduleState:
    """The schedule at ``now``; with a ready-by ``lead``, a start due within the lead is wanted already
    (and recorded as that start's transition, so it is not issued twice)."""
    if lead is not None and schedule.ready_by and not schedule.is_running(now):
        upcoming = schedule.next_transition(now)
        if upcoming is not None and upcoming.state == "running" and upcoming.at - now <= lead:
            return ScheduleState(desired="running", last_transition_at=upcoming.at, allowed=_allowed(schedule))
    last = schedule.last_transition(now)
    return ScheduleState(
        desired=schedule.state_at(now), last_transition_at=last.at if last else None, allowed=_allowed(schedule)
    )


def ref_for(name: str, region: str | None, profile: str | None = None, account: str | None = None) -> ClusterRef:
    region = region or default_region(profile)
    return ClusterRef(
        key=cluster_key(name, region, account), name=name, region=region, profile=profile, account=account
    )


# Where a cluster outside the config takes its settings from (a manual stop of any cluster).
OUTSIDE = "defaults (not in the config)"

AccountLookup = Callable[[Reach], "str | None"]


class Fleet:
    """The config resolved against schedules; tag-selected clusters are found through ``client_for``."""

    def __init__(
        self,
        config: Config,
        client_for: Callable[[ClusterRef], SageMakerClient],
        accounts: AccountLookup | None = None,
        *,
        tag_concurrency: int = 1,
    ) -> None:
        """``accounts``: the store's memory of which account each profile reaches (``account_for``), so
        governed clusters carry their record's key; without it the engine still learns it on first look,
        but a face reading records by ``ref.key`` would look where they were before account keys.
        ``tag_concurrency``: ListTags calls at once in a discovery (a face's shared refresh reads a
        thousand clusters' tags 8 at a time rather than one after another)."""
        self.config = config
        self.tag_concurrency = tag_concurrency
        self.client_for = client_for
        self.accounts = accounts
        self.schedules = load_schedules(config.schedules)
        self.problems: list[Skipped] = []  # what governed() left out, each with its reason
        self._tagged: set[Reach] = set()  # the ways of reaching clusters governed by a tag selector

    def _schedule(self, label: str | None, where: str) -> tuple[str, Schedule]:
        label = label or self.config.defaults.schedule
        if not label:
            raise UsageError(f"{where}: no schedule (set `schedule` on the cluster, its target, or `defaults`)")
        return label, resolve(label, self.schedules)

    def governed(self, *, absent: frozenset[Reach] = frozenset()) -> list[Governed]:
        """Every governed cluster. A target that cannot be read (denied discovery, an unknown profile)
        is left out with its reason in ``problems``; the other targets are still governed. ``absent``:
        reaches whose first look this tick found no cluster of their name (``Context.tick``, resolving
        again after the first looks): they hold no namesake back."""
        self.problems = []
        out: dict[Reach, Governed] = {}  # one cluster per way of reaching it; two profiles may share a name
        self._tagged = set()
        for i, target in enumerate(self.config.targets):
            try:
                self._target(i, target, out)
            except (HyperpodSchedulerError, ClientError, BotoCoreError) as exc:
                self.problems.append(Skipped(_where(i, target), _one_line(exc), cause=exc))
        profiles: dict[tuple[str, str], set[str]] = {}
        for reach in out:
            profiles.setdefault((reach.region, reach.name), set()).add(reach.profile)
        found = []
        for reach, g in out.items():
            ref = dataclasses.replace(
                g.ref, namesakes=tuple(sorted(profiles[(reach.region, reach.name)] - {reach.profile}))
            )
            if ref.account is None and self.accounts is not None:
                account = self.accounts(reach)
                ref = ref.with_account(account) if account is not None else ref
            found.append(dataclasses.replace(g, ref=ref))
        return self._once(found, absent)

    def _once(self, found: list[Governed], absent: frozenset[Reach]) -> list[Governed]:
        """Each cluster governed once: two credentials (the default chain and a profile, say) may reach one
        account. A cluster a tag selector finds and another target names is the naming target's (while
        that one's account is not known yet, the tagged one waits for its first look); two targets naming
        it is a config to fix: the first governs it and the other is said. Both governing it would race
        two policies on one record."""
        named, first = [], dict[str, Reach]()
        for g in (g for g in found if reach_of(g.ref) not in self._tagged):
            owner = first.setdefault(g.ref.key, reach_of(g.ref)) if g.ref.account else reach_of(g.ref)
            if owner == reach_of(g.ref):
                named.append(g)
                continue
            why = f"{reach_of(g.ref)} reaches account {g.ref.account}'s cluster, which {owner} governs: name it once"
            self.problems.append(Skipped(f"cluster '{g.ref.name}'", why, g.ref.name))
        unknown, kept = {(g.ref.region, g.ref.name) for g in named if g.ref.account is None}, {id(g) for g in named}
        once = [
            g
            for g in found
            if id(g) in kept
            or (
                reach_of(g.ref) in self._tagged and g.ref.key not in first and (g.ref.region, g.ref.name) not in unknown
            )
        ]
        return self._looks_first(once, absent)

    def _looks_first(self, governed: list[Governed], absent: frozenset[Reach]) -> list[Governed]:
        """Named namesakes (two targets, one name, one region) whose sameness is not known yet: each
        one whose own account, or the account of one named before it, is unknown only looks this turn."""
        seen: dict[tuple[str | None, str], bool] = {}  # (region, name) -> an account so far unknown
        out = []
        for g in governed:
            if not g.ref.namesakes or reach_of(g.ref) in self._tagged:
                out.append(g)
                continue
            where = (g.ref.region, g.ref.name)
            open_before = seen.get(where, False)
            seen[where] = open_before or (g.ref.account is None and reach_of(g.ref) not in absent)
            out.append(dataclasses.replace(g, looks_first=True) if open_before or g.ref.account is None else g)
        return out

    def _target(self, i: int, target: Target, out: dict[Reach, Governed]) -> None:
        for entry in target.clusters:
            where = f"targets[{i}] cluster '{entry.name}'"
            label, schedule = self._schedule(entry.schedule or target.schedule, where)
            settings = self.settings(where, target, entry)
            ref = ref_for(entry.name, target.region, target.profile).governed(settings)
            enforced = _first(entry.enforced, target.enforced, self.config.defaults.enforced)
            out[reach_of(ref)] = Governed(ref, label, schedule, enforced)
            self._tagged.discard(reach_of(ref))
        if target.tag_selector:
            settings = self.settings(f"{_where(i, target)} tag selector", target)
            for found, label in self._discover(i, target):
                ref = found.governed(settings)
                if reach_of(ref) in out:
                    continue  # an explicit entry wins over the tag
                try:
                    _, schedule = self._schedule(label, f"cluster '{ref.name}' tag {SCHEDULE_TAG}")
                except UsageError as exc:
                    # Anyone can tag a cluster: a bad tag skips that cluster, never the whole fleet.
                    self.problems.append(Skipped(f"cluster '{ref.name}'", str(exc), ref.name))
                    continue
                enforced = _first(target.enforced, self.config.defaults.enforced)
                out[reach_of(ref)] = Governed(ref, label, schedule, enforced)
                self._tagged.add(reach_of(ref))

    def _discover(self, i: int, target: Target) -> Iterable[tuple[ClusterRef, str]]:
        probe = ref_for("-", target.region, target.profile)
        client = self.client_for(probe)
        listed = Pages(lambda **kw: client.list_clusters(**kw), "ListClusters", "ClusterSummaries", MaxResults=100)
        summaries = list(listed)

        def tags_of(summary: Mapping[str, Any]) -> list[Mapping[str, Any]] | Exception:
            try:
                return self._tags(client, summary["ClusterArn"])
            except (ClientError, BotoCoreError, KeyError, HyperpodSchedulerError) as exc:
                return exc

        if self.tag_concurrency > 1 and len(summaries) > 1:
            with ThreadPoolExecutor(min(self.tag_concurrency, len(summaries)), thread_name_prefix="tags") as pool:
                answers = list(pool.map(tags_of, summaries))
        else:
            answers = [tags_of(s) for s in summaries]
        for summary, tags in zip(summaries, answers, strict=True):
            name = summary.get("ClusterName", "?")
            if isinstance(tags, Exception):
                self.problems.append(Skipped(f"cluster '{name}'", f"cannot read its tags: {_one_line(tags)}", name))
                continue
            label = next((t["Value"] for t in tags if t.get("Key") == SCHEDULE_TAG), None)
            if label:
                # The listing names each cluster's ARN, so its account is known without another call.
                try:
                    account: str | None = arn_account(str(summary.get("ClusterArn", "")))
                except HyperpodSchedulerError:
                    account = None
                yield ref_for(name, target.region, target.profile, account), label
        if listed.cut:  # the clusters read so far are governed; the rest are said, not silently dropped
            self.problems.append(Skipped(_where(i, target), f"discovery by tag incomplete: {listed.cut}"))

    @staticmethod
    def _tags(client: Any, arn: str) -> list[Mapping[str, Any]]:
        listed = Pages(lambda **kw: client.list_tags(**kw), "ListTags", "Tags", ResourceArn=arn)
        tags = [t for t in listed if isinstance(t, Mapping)]
        if listed.cut:  # the schedule tag may be on a page not read: not a reading to act on
            raise HyperpodSchedulerError(listed.cut)
        return tags

    def settings(self, where: str, target: Target | None = None, entry: ClusterEntry | None = None) -> ClusterSettings:
        """A cluster's settings from its own entry, its own target and the defaults (the nearest wins,
        field by field for the policy, whole for the checkpoint block). No target: a cluster outside
        the config, judged by the defaults (scarce capacity and training plans still protected)."""
        defaults = self.config.defaults
        policy = merge_policies(entry.policy if entry else None, target.policy if target else None, defaults.policy)
        blocks = (entry.checkpoints if entry else None, target.checkpoints if target else None, defaults.checkpoints)
        block = next((b for b in blocks if b is not None), None)
        return ClusterSettings(
            policy=policy,
            image=ImagePolicy.of(policy),
            checkpoints=block if isinstance(block, CheckpointSettings) else None,
            unaudited=block == "none",
            governed_by=where,
        )

    def find(self, name: str, region: str | None = None, profile: str | None = None) -> Governed | None:
        """The governed cluster of this name (in ``region``, through ``profile`` when given). Two
        profiles naming it (two accounts' clusters, perhaps) and none given is a usage error."""
        found = [
            g
            for g in self.governed()
            if g.ref.name == name
            and (region is None or g.ref.region == region)
            and (profile is None or (g.ref.profile or None) == profile)
        ]
        if len({(g.ref.region, g.ref.profile) for g in found}) > 1:
            where = ", ".join(sorted(f"{g.ref.region} profile {g.ref.profile or '(default)'}" for g in found))
            raise UsageError(
                f"cluster '{name}' is named more than once in the config ({where}): "
                "say which with --region or --profile"
            )
        return found[0] if found else None


def tick(
    engine: Engine,
    governed: Iterable[Governed],
    now: datetime,
    *,
    dry_run: bool = False,
    ready_by: ReadyBy | None = None,
    concurrency: int = 1,
    dashboard_url: str | None = None,
    pool: Pool | None = None,
) -> list[Result]:
    """One reconcile pass: each cluster is judged on its own; one failure never stops the others.
    Around each cluster's turn: approvals asked before a stop that needs one (links to
    ``dashboard_url``), requests nobody answered marked lapsed, and its training plans watched.

    Turns run through ``pool`` (a face passes its own: the Lambda worker's, which stops starting turns
    near its deadline), else ``threads(concurrency)``. A cluster's failure is caught in ``caught``."""

    # One evaluation per schedule and lead for the pass (the clock is the pass's ``now``): the clusters
    # of a target share their schedule, and each turn evaluating it again cost as much as its planning.
    states: dict[tuple[int, timedelta | None], tuple[Schedule, ScheduleState]] = {}

    def state_of(schedule: Schedule, lead: timedelta | None) -> ScheduleState:
        known = states.get((id(schedule), lead))
        if known is None or known[0] is not schedule:
            known = (schedule, schedule_state(schedule, now, lead))
            states[(id(schedule), lead)] = known
        return known[1]

    def one(g: Governed) -> Result:
        if g.looks_first:  # before the approvals too: this turn acts in no target's name, asks nothing
            return first_look(engine, g, now, dry_run)
        outcome: list[Result] = []

        def one_turn() -> None:
            lead = lead_for(engine, g, ready_by) if g.schedule.ready_by else None
            state = state_of(g.schedule, lead.lead if lead else None)
            if lead is not None and state.last_transition_at is not None and state.last_transition_at > now:
                at = state.last_transition_at
                state = dataclasses.replace(
                    state, why=f"ready by {at:%a %H:%M}Z: {lead.lead.total_seconds() / 60:.0f} min early ({lead.why})"
                )
            outcome.append(engine.reconcile(g.ref, state, enforced=g.enforced, dry_run=dry_run))

        if not dry_run and g.policy.approve_release:
            caught(
                engine,
                g.ref,
                now,
                "approval",
                lambda: ask_if_due(engine, g.ref, g.schedule, g.policy, now, dashboard_url),
            )
        if not dry_run and g.ref.settings.image.approve:
            caught(
                engine,
                g.ref,
                now,
                "approval",
                lambda: image_approval.ask_if_due(engine, g.ref, g.schedule, now, dashboard_url),
            )
        failed = caught(engine, g.ref, now, None, one_turn)
        if failed is None and not dry_run:
            if g.policy.approve_release:
                caught(engine, g.ref, now, "approval", lambda: lapse_due(engine, g.ref, now))
            caught(engine, g.ref, now, "training plan watch", lambda: watch_plans(engine, g.ref, now))
        # How the turn's DescribeCluster reads went, onto the record (a face then says since when AWS
        # has not answered, engine.reads): after the turn, never inside its compare-and-sets.
        caught(engine, g.ref, now, "reads", lambda: engine.keep_reads(g.ref, write=not dry_run))
        return failed or outcome[0]

    return (pool or threads(concurrency))(one, list(governed))


Pool = Callable[[Callable[[Governed], Result], Sequence[Governed]], list[Result]]


def first_look(engine: Engine, g: Governed, now: datetime, dry_run: bool) -> Result:
    """A ``looks_first`` turn: the account learned (one DescribeCluster, unless known), nothing acted on.
    ``app.compose.Context.tick`` then resolves the fleet again and runs the turns the config's order now
    decides, in the same tick."""
    learned: list[ClusterRef] = []
    gone: list[bool] = []

    def look() -> None:
        try:
            learned.append(engine.identify(g.ref, dry_run=dry_run)[0])
        except ClientError as exc:
            gone.append(exc.response.get("Error", {}).get("Code") == "ResourceNotFound")
            raise

    failed = caught(engine, g.ref, now, None, look)
    if failed is not None:
        return dataclasses.replace(failed, no_cluster=any(gone))
    others = ", ".join(f"profile '{p}'" if p else "the default credentials" for p in g.ref.namesakes)
    account = learned[0].account or "not known yet"
    return Result(
        g.ref.name,
        "waiting",
        f"account {account}; another target names '{g.ref.name}' in {g.ref.region} too ({others}): acting "
        "once the config's order says which target governs it",
    )


def threads(concurrency: int) -> Pool:
    """Turns run ``concurrency`` at a time (the AWS calls overlap; every cluster still has its own lease
    and compare-and-set, so the outcome is the same as in series)."""

    def run(one: Callable[[Governed], Result], governed: Sequence[Governed]) -> list[Result]:
        if concurrency <= 1 or len(governed) <= 1:
            return [one(g) for g in governed]
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="tick") as pool:
            return list(pool.map(one, governed))

    return run


def caught(
    engine: Engine, ref: ClusterRef, now: datetime, what: str | None, step: Callable[[], object]
) -> Result | None:
    """The one place a cluster's failure is caught and reported (one error line, then the next
    cluster). ``what`` None: the cluster's turn itself, whose failure is its result; otherwise a step
    beside the turn (approvals, the plan watch), whose failure never costs the cluster its turn."""
    try:
        step()
    except Exception as exc:  # whatever it is (a damaged record, the store, a bug met on its data)
        message = error_text(exc) if what is None else f"{what}: {error_text(exc)}"
        engine.events(Event(now, ref.name, "error", message, where=ref.where))
        return Result(ref.name, "error", message)
    return None


def turn(
    engine: Engine, ref: ClusterRef, state: ScheduleState, *, enforced: bool = False, dry_run: bool = False
) -> Result:
    """One cluster's turn alone, its failure caught as a tick catches it (for a face or a test that
    runs one turn with a schedule state of its own)."""
    out: list[Result] = []
    failed = caught(
        engine,
        ref,
        engine.now(),
        None,
        lambda: out.append(engine.reconcile(ref, state, enforced=enforced, dry_run=dry_run)),
    )
    caught(engine, ref, engine.now(), "reads", lambda: engine.keep_reads(ref, write=not dry_run))
    return failed or out[0]


def lead_for(engine: Engine, g: Governed, settings: ReadyBy | None) -> Lead:
    # The record lives under the account's key once the account is known: read it there, from the
    # store alone (a tick with nothing due makes no API call).
    ref = engine.accounts.known(g.ref) or g.ref
    record = engine.store.get(ref.key)
    if record is None:
        return lead_time([], settings or ReadyBy())
    sizes = record.snapshot.sizes if record.snapshot is not None else {}
    kept = record.snapshot.kept if record.snapshot is not None else {}
    # The groups the morning start raises: recorded above what the stop kept running.
    raised = {n: (s.instance_type, s.health_checks, s.count - kept.get(n, 0)) for n, s in sizes.items()}
    groups = histories(raised, record.group_phase_s)
    return cluster_lead(groups, record.start_durations_s, settings or ReadyBy())


def _where(i: int, target: Target) -> str:
    place = ", ".join(p for p in (target.region, f"profile {target.profile}" if target.profile else None) if p)
    return f"targets[{i}]" + (f" ({place})" if place else "")


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        text = f"{err.get('Code', 'Error')}: {err.get('Message', '')}"
    elif isinstance(exc, HyperpodSchedulerError | BotoCoreError):
        text = str(exc)
    else:
        text = f"unexpected {type(exc).__name__}: {exc}"
    return " ".join(text.split())


def _first(*values: Any) -> bool:
    return next(bool(v) for v in values if v is not None)
