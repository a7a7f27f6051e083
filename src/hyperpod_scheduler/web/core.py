"""The dashboard's core: its settings, the per-request context, access, and the reads every page shares
(the cluster a name means, DescribeCluster cached for a minute, the cost report).

The pages themselves are plain functions in their own modules (``fleet_view``, ``cluster_view``,
``manual``, ``schedules_view``, ``approval_page``, ``savings_view``); ``web.service.Dashboard`` puts
them together for the app.
"""

from __future__ import annotations

import hmac
import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.app import actions
from hyperpod_scheduler.app import report as reports
from hyperpod_scheduler.app.compose import Context, Source, chain_clients
from hyperpod_scheduler.app.looks import Looks
from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.config.load import config_path, load_config
from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.cost import summary
from hyperpod_scheduler.cost.fsx import FileSystem
from hyperpod_scheduler.cost.savings import Report
from hyperpod_scheduler.cost.settings import CostSettings
from hyperpod_scheduler.engine.fleet import OUTSIDE, Governed
from hyperpod_scheduler.engine.runner import ClusterRef
from hyperpod_scheduler.engine.stop_forecast import StopForecast
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.schedule import Schedule
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.store.errors import StoreError
from hyperpod_scheduler.web import places
from hyperpod_scheduler.web.places import ANYWHERE, Place

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from hyperpod_scheduler.store.base import StateStore

_MEMO_LOCK = threading.Lock()
WEEK = timedelta(days=7)
ActionName = Literal["hold", "release", "stop", "start"]
ACTIONS: tuple[ActionName, ...] = ("hold", "release", "stop", "start")
FSX_CACHE_S = reports.FSX_CACHE_S
FSX_NOT_READ = "FSx not read yet: the dashboard is reading the fleet from AWS now"


class NotFound(HyperpodSchedulerError):
    """A cluster or schedule the dashboard does not know."""


class Refused(HyperpodSchedulerError):
    """An action without the right token (401), or any action on a read-only dashboard (403)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class DashboardCore:
    """Everything the pages need; ``token`` None makes it read-only."""

    config_file: str | None = None
    state: str | None = None
    token: str | None = None
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    client_for: Callable[[ClusterRef], SageMakerClient] | None = None
    file_systems: reports.FileSystemSource | None = None  # default: the cost report's FSx discovery
    fixed_context: Context | None = None  # a caller's context (the HTML report), used as is
    aws: AwsClients = field(default_factory=AwsClients)  # FSx, S3 and Pricing clients (the demo: its emulator)
    cost: CostSettings | None = None  # the report's cost settings, instead of the config's (report --html)
    source: Callable[[], Source] | None = None  # the launcher's (the fleet's table), instead of config_file
    _store: StateStore | None = None
    # FSx discovery is several AWS calls per cluster; file systems rarely change, so a recent answer
    # is reused rather than paid for on every page view.
    _fsx_cache: dict[tuple[str, ...], tuple[float, dict[str, list[FileSystem]], list[str]]] = field(
        default_factory=dict
    )
    # The fleet's governed clusters and DescribeCluster answers, read by one shared refresh and by the
    # engine's own looks (app.looks), never once per cluster per request. Shared by a dataclasses.replace.
    looks: Looks = field(default_factory=Looks)
    # The Fleet page's rows are the store's of at most this long ago (web.fleet_view; 0: every request).
    rows_max_age_s: float = 5.0  # web.fleet_view.ROWS_MAX_AGE_S
    # The config file parsed once per version of it (a 1,000-cluster YAML is a second to parse): keyed
    # by what changes when it is saved, and by the HYPERPOD_SCHEDULER_* settings that may apply to it.
    _config_memo: tuple[tuple[Any, ...], Config] | None = None
    # The governed fleet as one request's context read it: finding it again is discovery again
    # (ListClusters and tags), and a page asks for a cluster and then for its namesakes.
    _governed_in: weakref.WeakKeyDictionary[Context, list[Governed]] = field(default_factory=weakref.WeakKeyDictionary)

    @property
    def read_only(self) -> bool:
        return not self.token

    @property
    def config_path(self) -> Path | None:
        return config_path(self.config_file)

    def store(self) -> StateStore:
        if self._store is None and self.source is not None:
            self._store = self.source().store
        if self._store is None:
            self._store = open_store(self.state or self._config().state)
        return self._store

    def close(self) -> None:
        self.looks.close()  # a refresh beside a request still reading the store: let it end first
        if self._store is not None:
            self._store.close()
            self._store = None

    def context(self) -> Context:
        """A fresh context per request: the config is re-read, so a schedule saved in the grid applies."""
        if self.fixed_context is not None:
            return self.fixed_context
        if self.source is not None:
            src = self.source()
            return Context(
                src.config, self.store(), src.clients, self.now, actor="dashboard", paused=src.paused,
                accounts=src.accounts, looks=self.looks,
            )  # fmt: skip
        return Context(
            self._config(), self.store(), chain_clients(self.client_for), self.now, actor="dashboard", looks=self.looks
        )

    def _config(self) -> Config:
        path = self.config_path
        try:
            st = path.stat() if path is not None else None
        except OSError:
            st = None  # load_config says what is wrong with it
        env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("HYPERPOD_SCHEDULER_")))
        key = (str(path), st.st_mtime_ns, st.st_size, st.st_ino, env) if st is not None else None
        memo = self._config_memo
        if key is not None and memo is not None and memo[0] == key:
            return memo[1]
        config = load_config(self.config_file)
        if key is not None:
            self._config_memo = (key, config)
        return config

    # ---- access ----------------------------------------------------------------------------------
    def token_matches(self, given: str | None) -> bool:
        """Whether ``given`` is the access token (constant time, so a guess learns nothing)."""
        return bool(self.token) and bool(given) and hmac.compare_digest(str(given).encode(), str(self.token).encode())

    def authorize(self, given: str | None) -> None:
        if not self.token:
            raise Refused("the dashboard is read-only: it was started without an access token", 403)
        # Constant time, so the comparison does not leak how much of a guess was right.
        if not given or not hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8")):
            raise Refused("access token missing or wrong: action refused", 401)

    # ---- reads -----------------------------------------------------------------------------------
    def governed(self, ctx: Context, name: str, place: Place = ANYWHERE, holding: str | None = None) -> Governed:
        """The governed cluster ``name`` at ``place`` (two targets' clusters of one name: the address must
        say which, else ``Ambiguous`` naming each). ``holding``: an approval id, which also tells two
        namesakes apart (the link a notification carried names the cluster only)."""
        found = [(place_of(g.ref), g) for g in self.all_governed(ctx, fresh=True) if g.ref.name == name]
        try:
            g = places.one(name, place, found)
        except places.Ambiguous:
            if holding is None:
                raise
            g = places.one(name, place, [(p, x) for p, x in found if _holds(ctx, x.ref, holding)])
        if g is None:
            where = f" in {place.text()}" if place.asked else ""
            raise NotFound(f"cluster: {name!r} is not governed by the config{where}")
        return g

    def target(self, ctx: Context, name: str, place: Place = ANYWHERE) -> tuple[Governed | None, ClusterRef]:
        """A governed cluster, or one the store remembers (a manual stop outside the config). For the
        pages that only read: from the shared reading of the fleet (no discovery per view of a cluster);
        an action finds its cluster afresh (``governed``)."""
        governed = self.all_governed(ctx)
        g = places.one(name, place, [(place_of(x.ref), x) for x in governed if x.ref.name == name])
        if g is not None:
            return g, g.ref
        known = {x.ref.key for x in governed}
        remembered = [
            (places.Place.of_key(key), key)
            for key in ctx.store.list_keys()
            if key.rsplit("/", 1)[-1] == name and not key.startswith("agent/") and key not in known
        ]
        key = places.one(name, place, remembered)
        if key is not None:
            region, _ = reports.split_key(key)
            return None, ClusterRef(key, name, region).governed(ctx.fleet().settings(OUTSIDE))
        where = f" in {place.text()}" if place.asked else ""
        raise NotFound(f"cluster: {name!r} is not governed by the config and not in the state store{where}")

    def all_governed(self, ctx: Context, *, fresh: bool = False) -> list[Governed]:
        """``ctx``'s governed fleet, read once per request context: for a page that only reads, the
        dashboard's shared reading (app.looks: no discovery per view); ``fresh`` (an action): found now."""
        with _MEMO_LOCK:
            hit = self._governed_in.get(ctx) if fresh else None
        if hit is None and not fresh:
            try:
                return self.looks.reading(ctx).governed
            except (ClientError, BotoCoreError, HyperpodSchedulerError):
                pass  # nothing could be read: the fleet's own reading below says what it could
        if hit is None:
            hit = ctx.fleet().governed()
            with _MEMO_LOCK:
                self._governed_in[ctx] = hit
        return hit

    def address(self, ctx: Context, name: str, ref: ClusterRef, governed: bool = True) -> str:
        """The query a page's links to cluster ``name`` carry: empty while the name alone finds it (a
        bare name finds the one governed cluster of that name first), its account and region while it
        does not (another governed cluster has the name; for one only the store remembers, any other)."""
        keys = {g.ref.key for g in self.all_governed(ctx) if g.ref.name == name}
        if not governed:
            keys |= {k for k in ctx.store.list_keys() if k.rsplit("/", 1)[-1] == name and not k.startswith("agent/")}
        return place_of(ref).query() if len(keys | {ref.key}) > 1 else ""

    def describe_cached(self, ctx: Context, ref: ClusterRef) -> Any:
        """DescribeCluster through the engine (answers checked), or the exception it raised, from the
        shared looks (app.looks): a look younger than their ``max_age`` (a tick's, an action's, the
        fleet refresh's), or an older one while the fleet refresh is reading it again; else read now."""
        look = self.looks.look(ref)
        if look is not None and (ctx.now() - look.at < self.looks.max_age or self.looks.refreshing):
            return look.answer
        engine = ctx.engine()
        try:
            answer: Any = engine.describe(ref)
        except (ClientError, BotoCoreError, HyperpodSchedulerError) as exc:
            answer = exc
        # What this look found about AWS goes onto the record as a turn's would (engine.reads: written only
        # when reachability changed), so no face says "unreachable" beside a describe that just answered.
        engine.keep_reads(ref)
        self.looks.keep(ref, answer, ctx.now())  # a caller's context (the HTML report) has no engine hook
        return answer

    def stop_forecast(
        self, ctx: Context, ref: ClusterRef, schedule: Schedule | None = None
    ) -> StopForecast | Exception:
        """What a stop would send (``app.actions.stop_forecast``) from the cached DescribeCluster, or
        the exception the describe raised, or the store's (a damaged record: its row says so).
        ``schedule``: its scheduled stop; None: a person's, now."""
        view = self.describe_cached(ctx, ref)
        if isinstance(view, Exception):
            return view
        try:
            return actions.stop_forecast(ctx, ref, view, schedule=schedule)
        except StoreError as exc:
            return exc

    def report(
        self, ctx: Context, since: datetime, until: datetime, *, aws: bool = True, notes: Sequence[str] = ()
    ) -> Report:
        """The same computation as ``report`` on the command line (``app.report.build``). ``aws`` False:
        FSx only as a refresh already found it (a fleet not read yet: no AWS call per cluster). ``notes``:
        what the caller has to say of the window (``app.report.window``), said first."""
        settings = self.cost or reports.cost_settings(ctx.config)
        notes = list(notes)
        table = reports.prices(settings.prices, ctx.now(), self.aws, notes)
        return reports.build(
            ctx.store,
            table,
            self._systems(ctx) if aws else self._systems_found,
            since,
            until,
            notes,
            ctx.config,
        )

    def _systems(self, ctx: Context) -> reports.FileSystemSource:
        if self.file_systems is not None:
            return self.file_systems
        stopped = reports.seen_by_stops(ctx.store)
        return reports.FileSystemFinder(
            ctx.config,
            lambda region, profile: ctx.client_for(ClusterRef("", "", region, profile)),
            self.aws,
            cache_s=FSX_CACHE_S,
            cache=self._fsx_cache,
            described=lambda key: _first_known(self.looks.raw(key), stopped(key)),
        )

    def _systems_found(self, keys: Any, notes: list[str]) -> dict[str, list[FileSystem]]:
        kept = self._fsx_cache.get(tuple(keys))
        if kept is not None:
            return kept[1]
        notes.append(FSX_NOT_READ)
        return {}

    def this_month(self, ctx: Context, *, aws: bool = True) -> dict[str, Any]:
        now = ctx.now()
        month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        return summary.as_document(self.report(ctx, month, now, aws=aws)) if now > month else {"clusters": []}


def _first_known(*answers: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return next((a for a in answers if a is not None), None)


def place_of(ref: ClusterRef) -> Place:
    """Where a governed cluster is: its account (when known), region, and the profile that reaches it."""
    return Place(ref.account, ref.region, ref.profile)


def _holds(ctx: Context, ref: ClusterRef, approval_id: str) -> bool:
    record = ctx.store.get((ctx.engine().accounts.known(ref) or ref).key)
    return record is not None and any(a.id == approval_id for a in record.approvals)
