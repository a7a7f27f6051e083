"""What the faces show of each cluster from AWS, read once per fleet, not once per request (issue 30).

A Fleet page at 1,000 clusters cannot describe every cluster and read every cluster's tags on every
view: at 20 ms a call that is 40 s. Instead one ``Looks`` (the dashboard keeps it for its lifetime)
holds, for a fleet:

- the governed clusters as discovery found them (ListClusters and ListTags for tag-selected targets),
- each cluster's last DescribeCluster answer (its ``Look``), with when it was taken,

and one shared refresh reads them again, ``concurrency`` calls at a time, when they are older than
``max_age``. A request with something cached never waits for AWS: it is answered from the cache (the
page says how old: "cluster sizes as of 14:02, 40 s ago") and the refresh runs beside it, one at a time.
Only the first request of a fleet, with nothing cached, waits for the first reading.

The engine's own looks refresh it: a context built with these looks hands the engine a ``looked`` hook,
so a DescribeCluster a tick or a dashboard action makes replaces the cached answer at no extra call. A
record written after a cluster's look (the engine acted on it, perhaps in another process) makes that
look stale, and the next refresh reads it again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.errors import HyperpodSchedulerError

if TYPE_CHECKING:
    from hyperpod_scheduler.app.compose import Context
    from hyperpod_scheduler.cluster.view import ClusterView
    from hyperpod_scheduler.engine.fleet import Governed, Skipped
    from hyperpod_scheduler.engine.ref import ClusterRef
    from hyperpod_scheduler.store.records import Reach

MAX_AGE = timedelta(seconds=60)  # a minute-old size will do for a page that reloads every minute
CONCURRENCY = 8  # below the clients' connection pool (10): no call waits for a connection
Spawn = Callable[[Callable[[], None]], None]


@dataclass(frozen=True)
class Look:
    """One cluster's DescribeCluster answer (or the error it gave) and when it was taken."""

    at: datetime
    answer: ClusterView | Exception
    by: str = "refresh"  # "refresh" (the shared refresh) or "engine" (a tick's or an action's own look)


@dataclass(frozen=True)
class Reading:
    """The fleet as the cache holds it: the governed clusters, what discovery left out, their looks."""

    governed: list[Governed]
    problems: list[Skipped]
    looks: Mapping[str, Look]  # by cluster key (the governed ref's)
    found_at: datetime  # when discovery found the governed clusters
    refreshing: bool = False

    @property
    def sizes_at(self) -> datetime | None:
        """The oldest look among the governed clusters: every size shown is at least this recent."""
        times = [look.at for g in self.governed if (look := self.looks.get(g.ref.key)) is not None]
        return min(times) if times else None


@dataclass(frozen=True)
class _Made:
    token: Any
    version: int  # the looks' version when the build began: a look kept since makes it old
    wall: float  # time.monotonic() when the build began
    now: datetime  # the caller's clock then
    made: Any


@dataclass
class _Fleet:
    identity: str
    found_at: datetime
    governed: list[Governed]
    problems: list[Skipped]


@dataclass
class Looks:
    """The shared cache; thread-safe (requests and the refresh run in several threads)."""

    max_age: timedelta = MAX_AGE
    concurrency: int = CONCURRENCY
    spawn: Spawn | None = None  # how work beside a request runs; None: a thread of its own, waited for by close()
    _looks: dict[Reach, Look] = field(default_factory=dict)
    _keys: dict[str, Reach] = field(default_factory=dict)  # a record's key -> how its cluster is reached
    _memo: dict[str, _Made] = field(default_factory=dict)
    _building: set[str] = field(default_factory=set)
    _threads: list[threading.Thread] = field(default_factory=list)
    _fleet: _Fleet | None = None
    _refreshing: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    refreshes: int = 0  # how many refreshes ran (for tests and the bench: a request made none)
    version: int = 0  # moves with every look kept: what was built from the looks is built again
    failure: str | None = None  # why the last refresh beside a request failed (None: it did not)

    def _beside(self, work: Callable[[], None]) -> None:
        if self.spawn is not None:
            self.spawn(work)
            return
        thread = threading.Thread(target=work, name="looks-refresh", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def close(self, timeout_s: float = 60.0) -> None:
        """Wait for the work beside requests to end (before the store it reads is closed under it)."""
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout_s)

    @property
    def refreshing(self) -> bool:
        return self._refreshing

    # ---- the engine's own looks ------------------------------------------------------------------
    def record(self, ref: ClusterRef, view: ClusterView, at: datetime) -> None:
        """The engine described ``ref`` (the hook ``Context.engine`` hands it): keep that answer."""
        self._keep(ref, Look(at, view, "engine"))

    def keep(self, ref: ClusterRef, answer: ClusterView | Exception, at: datetime) -> None:
        """A face's own look (the cluster page's DescribeCluster, or the error it gave)."""
        self._keep(ref, Look(at, answer, "refresh"))

    def _keep(self, ref: ClusterRef, look: Look) -> None:
        from hyperpod_scheduler.engine.identity import reach_of

        reach = reach_of(ref)
        # Never an older answer over a newer one (a refresh's look that finished after a tick's).
        with self._lock:
            held = self._looks.get(reach)
            if held is None or held.at <= look.at:
                self._looks[reach] = look
                self._keys[ref.key] = reach
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
        """What ``build`` made for ``name`` under the same ``token`` and looks: as it is while younger than
        ``fresh_s``; while younger than ``stale_s``, as it is too, with a build of it again beside this
        request (one at a time); older, changed, or never made: built now. Age is measured on the wall
        clock and on the caller's ``now`` (a demo's clock that jumps ahead makes it old at once)."""
        with self._lock:
            held = self._memo.get(name)
            version = self.version
        if held is not None and held.token == token and held.version == version:
            age = max(time.monotonic() - held.wall, abs((now - held.now).total_seconds()))
            if age < fresh_s:
                return held.made
            if age < stale_s:
                self._rebuild(name, token, build, now)
                return held.made
        return self._make(name, token, build, now, version)

    def _make(self, name: str, token: Any, build: Callable[[], Any], now: datetime, version: int) -> Any:
        wall = time.monotonic()
        made = build()
        with self._lock:
            self._memo[name] = _Made(token, version, wall, now, made)
        return made

    def _rebuild(self, name: str, token: Any, build: Callable[[], Any], now: datetime) -> None:
        with self._lock:
            if name in self._building:
                return
            self._building.add(name)
            version = self.version

        def run() -> None:
            try:
                self._make(name, token, build, now, version)
            finally:
                with self._lock:
                    self._building.discard(name)

        self._beside(run)

    # ---- the fleet -------------------------------------------------------------------------------
    def reading(self, ctx: Context) -> Reading:
        """The governed clusters and their looks: from the cache, with a refresh started beside this
        request when any of it is stale; read now only when nothing is cached for this config."""
        now = ctx.now()
        identity = _identity(ctx)
        with self._lock:
            fleet = self._fleet if self._fleet is not None and self._fleet.identity == identity else None
        if fleet is None:
            self._refresh(ctx, identity, everything=True)
            with self._lock:
                fleet = self._fleet
            assert fleet is not None
        elif self._stale(fleet, now):
            self._start(lambda: self._refresh(ctx, identity, everything=now - fleet.found_at >= self.max_age))
        with self._lock:
            looks = {g.ref.key: look for g in fleet.governed if (look := self._looks.get(_reach(g))) is not None}
            refreshing = self._refreshing
        return Reading(list(fleet.governed), list(fleet.problems), looks, fleet.found_at, refreshing)

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
        self._start(lambda: self._refresh(ctx, identity, everything=False))

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
            record = ctx.store.get(g.ref.key)
            if record is not None and record.updated_at > look.at:
                due.append(g)
        return due

    def _start(self, work: Callable[[], None]) -> None:
        with self._lock:
            if self._refreshing:
                return  # one refresh at a time: the one under way reads what this request would
            self._refreshing = True

        def run() -> None:
            try:
                work()
            except (ClientError, BotoCoreError, HyperpodSchedulerError) as exc:
                # Beside a request: nobody to answer. The kept reading stays, with its age shown, and the
                # next request past max_age tries again.
                self.failure = " ".join(str(exc).split())
            else:
                self.failure = None
            finally:
                with self._lock:
                    self._refreshing = False

        self._beside(run)

    def _refresh(self, ctx: Context, identity: str, *, everything: bool) -> None:
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
            unread = [p.cause for p in reader.problems if p.cause is not None]
            if unread and not governed:
                raise unread[0]  # nothing could be read at all: said (a 502), never kept as an empty fleet
            fleet = _Fleet(identity, now, governed, list(reader.problems))
        due = self._due(ctx, fleet.governed, now)
        engine = ctx.engine() if due else None

        def one(g: Governed) -> None:
            assert engine is not None
            answer: ClusterView | Exception
            try:
                answer = engine.describe(g.ref)  # checked as every engine answer is
            except (ClientError, BotoCoreError, HyperpodSchedulerError) as exc:
                answer = exc
            # What the look found about AWS goes onto the record as a turn's would (engine.reads: written
            # only when reachability changed): no face says "unreachable" beside a look that answered.
            engine.keep_reads(g.ref)
            self._keep(g.ref, Look(ctx.now(), answer))

        if len(due) > 1 and self.concurrency > 1:
            with ThreadPoolExecutor(min(self.concurrency, len(due)), thread_name_prefix="looks") as pool:
                list(pool.map(one, due))
        else:
            for g in due:
                one(g)
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


__all__ = ["CONCURRENCY", "MAX_AGE", "Look", "Looks", "Reading"]
