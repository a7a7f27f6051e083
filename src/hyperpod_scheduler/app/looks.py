"""What the faces show of each cluster from AWS, read once per fleet, not once per request (issue 30).

A Fleet page at 1,000 clusters cannot describe every cluster and read every cluster's tags on every
view: at 20 ms a call that is 40 s. Instead one ``Looks`` (the dashboard keeps it for its lifetime)
holds, for a fleet:

- the governed clusters as discovery found them (ListClusters and ListTags for tag-selected targets),
- each cluster's last DescribeCluster answer (its ``Look``), with when it was taken,

and one shared refresh reads them again, ``concurrency`` calls at a time, when they are older than
``max_age``. A request never waits for AWS: it is answered from the cache (the page says how old:
"cluster sizes as of 14:02, 40 s ago") and the refresh runs beside it, one at a time. The first request
of a fleet, with nothing cached (a dashboard just started), is answered from what needs no AWS call: the
config's named clusters (tag-selected ones as the last refresh of this process found them, else not yet)
and the store's records, each marked "from the store" (``Reading.cold``); the first refresh starts
beside it, and the page shows how far it has got (``Reading.progress``). The dashboard also starts it
when it starts (``warm``), so a person seldom meets that state at all.

The engine's own looks refresh it: a context built with these looks hands the engine a ``looked`` hook,
so a DescribeCluster a tick or a dashboard action makes replaces the cached answer at no extra call. A
record written after a cluster's look (the engine acted on it, perhaps in another process) makes that
look stale, and the next refresh reads it again. An UpdateCluster an engine of this process sends drops
the cluster's look first (the ``changing`` hook): it showed the cluster from before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.app.freshness import LookSeen
from hyperpod_scheduler.app.kept import Kept
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.store.errors import StoreError

if TYPE_CHECKING:
    from hyperpod_scheduler.app.compose import Context
    from hyperpod_scheduler.cluster.view import ClusterView
    from hyperpod_scheduler.engine.fleet import Governed, Skipped
    from hyperpod_scheduler.engine.ref import ClusterRef
    from hyperpod_scheduler.store.records import Reach

MAX_AGE = timedelta(seconds=60)  # a minute-old size will do for a page that reloads every minute
CONCURRENCY = 8  # below the clients' connection pool (10): no call waits for a connection
Spawn = Callable[[Callable[[], None]], None]
# A refresh call waits at most this long for the requests being answered (one that hangs never stops it).
YIELD_MAX_S = 2.0
REFRESH_THREAD = "looks-refresh"


@dataclass(frozen=True)
class Look:
    """One cluster's DescribeCluster answer (or the error it gave) and when it was taken."""

    at: datetime
    answer: ClusterView | Exception
    by: str = "refresh"  # "refresh" (the shared refresh) or "engine" (a tick's or an action's own look)
    # A failed look: since when looks of this cluster fail (the first failure after its last good look).
    failing_since: datetime | None = None
    ok_at: datetime | None = None  # the last look that answered (this one, when it did)

    @property
    def failed(self) -> bool:
        return isinstance(self.answer, Exception)

    @property
    def unanswered(self) -> bool:
        """A failed look AWS did not answer (no connection, a timeout, throttling, a 5xx): the one kind a
        face may call "AWS unreachable". An error AWS answered with (AccessDenied, ResourceNotFound) or
        one met on our side (a bug, a client that cannot be built) is not: the engine's reads say so."""
        from hyperpod_scheduler.engine.reads import unanswered

        return isinstance(self.answer, Exception) and unanswered(self.answer)

    def seen(self) -> LookSeen:
        """This look as ``app.freshness`` reads it: its error on one line, and whether it went unanswered."""
        error = (" ".join(str(self.answer).split()) or type(self.answer).__name__) if self.failed else None
        return LookSeen(self.at, self.ok_at, self.failing_since, error, self.unanswered)


class NotLookedAt(HyperpodSchedulerError):
    """A governed cluster not looked at yet (the refresh is reading it): what its stop would send is not
    known from AWS, and a face says so rather than describe it inside a request."""


@dataclass(frozen=True)
class Progress:
    """How far the refresh under way has got: ``done`` of ``total`` clusters looked at."""

    done: int
    total: int
    started: datetime


@dataclass(frozen=True)
class Reading:
    """The fleet as the cache holds it: the governed clusters, what discovery left out, their looks."""

    governed: list[Governed]
    problems: list[Skipped]
    looks: Mapping[str, Look]  # by cluster key (the governed ref's)
    found_at: datetime  # when discovery found the governed clusters
    refreshing: bool = False
    # Nothing read from AWS yet for this fleet: the governed clusters are the config's (and the ones this
    # process found by tag before), every figure the store's. The first refresh is under way beside.
    cold: bool = False
    progress: Progress | None = None  # the refresh under way, if any
    refreshed_at: datetime | None = None  # when the last refresh of this fleet ended (None: none yet)

    @property
    def sizes_at(self) -> datetime | None:
        """The oldest look among the governed clusters: every size shown is at least this recent."""
        times = [look.at for g in self.governed if (look := self.looks.get(g.ref.key)) is not None]
        return min(times) if times else None


@dataclass
class _Fleet:
    identity: str
    found_at: datetime
    governed: list[Governed]
    problems: list[Skipped]
    cold: bool = False  # found without AWS (``Looks._from_store``): no discovery has run for it yet
    refreshed_at: datetime | None = None


@dataclass
class Looks:
    """The shared cache; thread-safe (requests and the refresh run in several threads)."""

    max_age: timedelta = MAX_AGE
    concurrency: int = CONCURRENCY
    spawn: Spawn | None = None  # how work beside a request runs; None: a thread of its own, waited for by close()
    # A fleet's first request answered from the store while the first refresh runs beside it (a dashboard);
    # False: read then and there (a one-shot face, the HTML report, has no later request to show it to).
    cold_first: bool = True
    _looks: dict[Reach, Look] = field(default_factory=dict)
    # How many UpdateCluster calls this process's engines have sent each cluster (``changing``): a look
    # whose DescribeCluster went out before one of them is not kept (it shows the cluster from before).
    _sends: dict[Reach, int] = field(default_factory=dict)
    _keys: dict[str, Reach] = field(default_factory=dict)  # a record's key -> how its cluster is reached
    _threads: list[threading.Thread] = field(default_factory=list)
    _fleet: _Fleet | None = None
    _refreshing: bool = False
    _progress: Progress | None = None
    _telling: bool = False  # the ``after`` hooks of a refresh that ended are running
    _serving: int = 0  # requests being answered now: the refresh's next calls wait for them (``serving``)
    _quiet: threading.Condition = field(default_factory=threading.Condition)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # ``close``: each call moves the generation on (a refresh begun before it stops sending), and while
    # any call is under way no refresh starts.
    _generation: int = 0
    _closers: int = 0
    # Told when a refresh has ended, in its own thread (the dashboard builds its pages again there, so the
    # next request finds them built).
    after: list[Callable[[], None]] = field(default_factory=list)
    refreshes: int = 0  # how many refreshes ran (for tests and the bench: a request made none)
    version: int = 0  # moves with every look kept: what was built from the looks is built again
    failure: str | None = None  # why the last refresh beside a request failed (None: it did not)
    _kept: Kept = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._kept = Kept(lambda: self.version, self._beside)

    def _beside(self, work: Callable[[], None]) -> None:
        if self.spawn is not None:
            self.spawn(work)
            return
        thread = threading.Thread(target=work, name=REFRESH_THREAD, daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def close(self, timeout_s: float = 60.0) -> None:
        """End the work beside requests and wait for it (before the store it reads is closed under it):
        a refresh under way sends no further DescribeCluster (those in flight end within their call
        deadlines), so a server shutting down, or a test ending, leaves no thread reading on behind it.
        The looks stay usable: a later request starts a refresh again. ``timeout_s`` bounds the whole
        wait; a thread still in a call then sends nothing after it (its generation has passed)."""
        with self._lock:
            self._closers += 1
            self._generation += 1
        with self._quiet:
            self._quiet.notify_all()  # a look waiting for requests to end stops waiting
        deadline = time.monotonic() + timeout_s
        try:
            while True:  # again and again: work begun meanwhile (a build, a warm-up's rows) is waited for too
                with self._lock:
                    alive = [t for t in self._threads if t.is_alive() and t is not threading.current_thread()]
                left = deadline - time.monotonic()
                if not alive or left <= 0:
                    return
                alive[0].join(left)
        finally:
            with self._lock:
                self._closers -= 1

    @property
    def refreshing(self) -> bool:
        return self._refreshing

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Around each request the dashboard answers: while any is, the refresh sends no new call. Its
        thousand answers are parsed in this process; on a small machine, parsed beside a request, they
        would make that request wait seconds for the CPU. The refresh goes on between requests."""
        with self._quiet:
            self._serving += 1
        try:
            yield
        finally:
            with self._quiet:
                self._serving -= 1
                self._quiet.notify_all()

    def _between_requests(self) -> None:
        with self._quiet:
            self._quiet.wait_for(lambda: self._serving == 0 or self._closers > 0, timeout=YIELD_MAX_S)

    @property
    def progress(self) -> Progress | None:
        """How far the refresh under way has got (None: none under way, or still finding the clusters)."""
        with self._lock:
            return self._progress if self._refreshing else None

    @property
    def refreshed_at(self) -> datetime | None:
        """When the last refresh of the current fleet ended (None: none has, since the dashboard started)."""
        with self._lock:
            return self._fleet.refreshed_at if self._fleet is not None else None

    # ---- the engine's own looks ------------------------------------------------------------------
    def record(self, ref: ClusterRef, view: ClusterView, at: datetime) -> None:
        """The engine described ``ref`` (the hook ``Context.engine`` hands it): keep that answer."""
        self._keep(ref, Look(at, view, "engine"))

    def keep(self, ref: ClusterRef, answer: ClusterView | Exception, at: datetime) -> None:
        """A face's own look (the cluster page's DescribeCluster, or the error it gave)."""
        self._keep(ref, Look(at, answer, "refresh"))

    def changing(self, ref: ClusterRef) -> None:
        """An engine of this process is sending ``ref`` an UpdateCluster (the hook ``Context.engine`` hands
        it): its look is of the cluster from before, so it is dropped, not shown as now. The cluster page
        reads it again at once; the Fleet page says it is not looked at yet until the refresh, which this
        starts, has. Timestamps cannot order this (a demo's clock stands still between the two), so a
        count does: a look whose call began before this is not kept either (``sends``)."""
        from hyperpod_scheduler.engine.identity import reach_of

        reach = reach_of(ref)
        with self._lock:
            self._sends[reach] = self._sends.get(reach, 0) + 1
            self._looks.pop(reach, None)
            self.version += 1

    def sends(self, ref: ClusterRef) -> int:
        """How many UpdateCluster calls this process has sent ``ref`` so far (taken before a look's call)."""
        from hyperpod_scheduler.engine.identity import reach_of

        with self._lock:
            return self._sends.get(reach_of(ref), 0)

    def _keep(self, ref: ClusterRef, look: Look, *, moves: bool = True, sends: int | None = None) -> None:
        """Keep ``look``; ``moves``: what was built from the looks is built again (a refresh's own looks
        move it once, when the refresh ends: a page is not built again for each of a thousand looks).
        ``sends``: ``sends(ref)`` before the look's call; an UpdateCluster sent since makes it not kept."""
        from hyperpod_scheduler.engine.identity import reach_of

        reach = reach_of(ref)
        # Never an older answer over a newer one (a refresh's look that finished after a tick's).
        with self._lock:
            if sends is not None and self._sends.get(reach, 0) != sends:
                # Its call went out before an update this process sent: it shows the cluster from before.
                # The engine's hook (``record``) may have kept that same answer already: dropped too (at
                # worst a look taken after the update goes with it, and is read again).
                self._looks.pop(reach, None)
                return
            held = self._looks.get(reach)
            if held is None or held.at <= look.at:
                if look.failed:
                    # A failing run goes on only through failures of one kind: a look AWS answered (with
                    # AccessDenied, say) between two it did not answer ends the unreachable period.
                    same = held is not None and held.failed and held.unanswered == look.unanswered
                    since = held.failing_since if held is not None and same else None
                    look = dataclasses.replace(
                        look, failing_since=since or look.at, ok_at=held.ok_at if held is not None else None
                    )
                else:
                    look = dataclasses.replace(look, failing_since=None, ok_at=look.at)
                self._looks[reach] = look
                self._keys[ref.key] = reach
                if moves:
                    self.version += 1

    def changed(self) -> None:
        """Something a face did changed what it shows (an action, a schedule saved): build it again."""
        with self._lock:
            self.version += 1

    def raw(self, key: str) -> Mapping[str, Any] | None:
        """The DescribeCluster answer kept for the cluster of record ``key`` (for FSx discovery, which
        then needs no DescribeCluster of its own), or None."""
        with self._lock:
            reach = self._keys.get(key)
            look = self._looks.get(reach) if reach is not None else None
        if look is None or isinstance(look.answer, Exception):
            return None
        return look.answer.raw

    def look(self, ref: ClusterRef) -> Look | None:
        from hyperpod_scheduler.engine.identity import reach_of

        with self._lock:
            return self._looks.get(reach_of(ref))

    def kept(
        self, name: str, token: Any, build: Callable[[], Any], now: datetime, fresh_s: float, stale_s: float
    ) -> Any:
        """What ``build`` made for ``name`` from these looks (``app.kept``: a few seconds as it is, built
        again beside a request while stale, built now once a look is kept or ``token`` changes)."""
        return self._kept.get(name, token, build, now, fresh_s, stale_s)

    # ---- the fleet -------------------------------------------------------------------------------
    def reading(self, ctx: Context, *, start_cold: bool = True) -> Reading:
        """The governed clusters and their looks: from the cache, with a refresh started beside this
        request when any of it is stale. With nothing cached for this config: the fleet as found without
        AWS (``_from_store``), marked ``cold``, and the first refresh started beside this request; with
        ``start_cold`` False, by the next reading (a face that builds its rows from the store first, so
        the refresh's thousand answers do not slow that build)."""
        now = ctx.now()
        identity = _identity(ctx)
        with self._lock:
            fleet = self._fleet if self._fleet is not None and self._fleet.identity == identity else None
        if fleet is None and not self.cold_first:
            self._refresh(ctx, identity, everything=True)
            with self._lock:
                fleet = self._fleet
            assert fleet is not None
        elif fleet is None:
            fleet = self._from_store(ctx, identity)
            with self._lock:
                if self._fleet is None or self._fleet.identity != identity:
                    self._fleet = fleet
            if start_cold:
                self._start(ctx, identity, everything=True)
        elif fleet.cold and not start_cold:
            pass
        elif fleet.cold or self._stale(fleet, now):
            everything = fleet.cold or now - fleet.found_at >= self.max_age
            self._start(ctx, identity, everything=everything)
        with self._lock:
            fleet = self._fleet if self._fleet is not None and self._fleet.identity == identity else fleet
            looks = {g.ref.key: look for g in fleet.governed if (look := self._looks.get(_reach(g))) is not None}
            refreshing, progress = self._refreshing, self._progress
        return Reading(
            list(fleet.governed), list(fleet.problems), looks, fleet.found_at, refreshing, fleet.cold,
            progress if refreshing else None, fleet.refreshed_at,
        )  # fmt: skip

    def warm(self, ctx: Context, then: Callable[[], None] | None = None) -> None:
        """Start the fleet's first refresh now (the dashboard starting), beside whoever calls, and
        ``then`` beside it too (the dashboard builds its rows from the store for the first viewer)."""
        self.reading(ctx, start_cold=then is None)
        if then is not None:
            self._beside(then)  # its own reading of the fleet starts the refresh once its rows are built

    def _from_store(self, ctx: Context, identity: str) -> _Fleet:
        """The fleet as known without one AWS call: the config's named clusters (their records' keys from
        the store's accounts), and the tag-selected clusters of an earlier refresh of this process; a
        tag-selected target with none is said in ``problems`` (not discovered yet), never guessed."""
        from hyperpod_scheduler.engine.fleet import Fleet, Skipped

        def no_aws(ref: ClusterRef) -> Any:
            raise HyperpodSchedulerError("not discovered yet: the dashboard is reading its clusters now")

        config: Any = ctx.config
        named = config.model_copy(
            update={"targets": [t.model_copy(update={"tag_selector": False}) for t in config.targets]}
        )
        reader = Fleet(named, no_aws, ctx.accounts or ctx.store.account_for)
        governed = reader.governed()
        problems = list(reader.problems)
        for i, target in enumerate(config.targets):
            if target.tag_selector:
                where = f"targets[{i}] ({target.region or 'default region'})"
                problems.append(Skipped(where, "tag-selected clusters not discovered yet: reading them now"))
        return _Fleet(identity, ctx.now(), governed, problems, cold=True)

    def _stale(self, fleet: _Fleet, now: datetime) -> bool:
        """Discovery or a look older than ``max_age`` (in memory: a request reads no record for it)."""
        if now - fleet.found_at >= self.max_age:
            return True
        with self._lock:
            looks = [self._looks.get(_reach(g)) for g in fleet.governed]
        return any(look is None or now - look.at >= self.max_age for look in looks)

    def nudge(self, ctx: Context) -> None:
        """Read the fleet's due looks again, beside the request (a record newer than its look)."""
        identity = _identity(ctx)
        self._start(ctx, identity, everything=False)

    def _due(self, ctx: Context, governed: Sequence[Governed], now: datetime) -> list[Governed]:
        """The clusters whose look is missing, old, or older than their record (the engine acted since)."""
        with self._lock:
            looks = {_reach(g): self._looks.get(_reach(g)) for g in governed}
        due = []
        for g in governed:
            look = looks[_reach(g)]
            if look is None or now - look.at >= self.max_age:
                due.append(g)
                continue
            try:
                record = ctx.store.get(g.ref.key)
            except StoreError:
                due.append(g)  # a damaged record (its row says so) is this cluster's, never the refresh's end
                continue
            if record is not None and record.updated_at > look.at:
                due.append(g)
        return due

    def _start(self, ctx: Context, identity: str, *, everything: bool) -> None:
        """Run ``_refresh`` beside the caller, stopped by any ``close`` called after it began."""
        with self._lock:
            if self._refreshing or self._telling or self._closers:
                return  # one refresh at a time (the one under way reads what this request would); none while closing
            self._refreshing = True
            generation = self._generation

        def stopped() -> bool:
            return self._generation != generation

        def run() -> None:
            try:
                self._refresh(ctx, identity, everything=everything, stopped=stopped)
            except (ClientError, BotoCoreError, HyperpodSchedulerError) as exc:
                # Beside a request: nobody to answer. The kept reading stays, with its age shown, and the
                # next request past max_age tries again.
                self.failure = " ".join(str(exc).split())
            else:
                if not stopped():  # a refresh cut short by close says nothing of the last failure
                    self.failure = None
            finally:
                with self._lock:
                    self.version += 1  # the refresh's looks, all at once
                    self._progress = None
                    self._refreshing = False
                    self._telling = True  # a hook's own reading starts no refresh of its own
                try:
                    for hook in list(self.after) if not stopped() else []:  # closed meanwhile: no rebuild
                        hook()
                finally:
                    with self._lock:
                        self._telling = False

        self._beside(run)

    def _refresh(
        self, ctx: Context, identity: str, *, everything: bool, stopped: Callable[[], bool] = lambda: False
    ) -> None:
        """Discovery again (``everything``), then DescribeCluster for every cluster whose look is due,
        ``concurrency`` at a time. A cluster that cannot be described keeps the error as its look
        (the page says so, and since when); a target that cannot be read is in ``problems``."""
        from hyperpod_scheduler.engine.fleet import Fleet

        now = ctx.now()
        with self._lock:
            fleet = self._fleet if self._fleet is not None and self._fleet.identity == identity else None
        if fleet is None or everything:
            reader = Fleet(
                ctx.config, ctx.client_for, ctx.accounts or ctx.store.account_for, tag_concurrency=self.concurrency
            )
            governed = reader.governed()
            if stopped():
                return  # closed while discovery read the targets: nothing more is sent, nothing kept
            unread = [p.cause for p in reader.problems if p.cause is not None]
            if unread and not governed:
                raise unread[0]  # nothing could be read at all: said (a 502), never kept as an empty fleet
            fleet = _Fleet(identity, now, governed, list(reader.problems))
        due = self._due(ctx, fleet.governed, now)
        with self._lock:
            self._progress = Progress(0, len(due), now)
        engine = ctx.engine() if due else None
        # In the looks' own thread it yields to requests; run by a caller (a test's spawn, the HTML report,
        # perhaps inside a request itself) it never waits.
        beside = self.spawn is None and threading.current_thread().name == REFRESH_THREAD

        def one(g: Governed) -> None:
            assert engine is not None
            answer: ClusterView | Exception
            if beside:
                self._between_requests()
            if stopped():
                return  # closed: this cluster keeps the look it had (a later refresh reads it)
            sends = self.sends(g.ref)
            try:
                answer = engine.describe(g.ref)  # checked as every engine answer is
            except Exception as exc:  # whatever it is (an AWS error, a bug met on its data, its client)
                answer = exc  # this cluster's look is the error (said, and since when); the others go on
            # What the look found about AWS goes onto the record as a turn's would (engine.reads: written
            # only when reachability changed): no face says "unreachable" beside a look that answered.
            with contextlib.suppress(StoreError):  # a damaged record (its row says so): the look is kept
                engine.keep_reads(g.ref)
            self._keep(g.ref, Look(ctx.now(), answer), moves=False, sends=sends)
            with self._lock:
                held = self._progress
                if held is not None:
                    self._progress = dataclasses.replace(held, done=held.done + 1)

        if len(due) > 1 and self.concurrency > 1:
            with ThreadPoolExecutor(min(self.concurrency, len(due)), thread_name_prefix="looks") as pool:
                list(pool.map(one, due))
        else:
            for g in due:
                one(g)
        if stopped():
            return  # cut short: not a refresh that ended (the clusters it did not read stay due)
        fleet.refreshed_at = ctx.now()
        with self._lock:
            self._fleet = fleet
            self.refreshes += 1


def _reach(g: Governed) -> Reach:
    from hyperpod_scheduler.engine.identity import reach_of

    return reach_of(g.ref)


def _identity(ctx: Context) -> str:
    """What discovery depends on: the targets and schedules (another config is another fleet)."""
    config: Any = ctx.config
    return str(config.model_dump_json(include={"targets", "schedules", "defaults"}))


__all__ = ["CONCURRENCY", "MAX_AGE", "Look", "Looks", "NotLookedAt", "Progress", "Reading"]
