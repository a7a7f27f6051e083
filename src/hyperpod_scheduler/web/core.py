"""The dashboard's core: its settings, the per-request context, access, and the reads every page shares
(the cluster a name means, DescribeCluster cached for a minute, the cost report).

The pages themselves are plain functions in their own modules (``fleet_view``, ``cluster_view``,
``manual``, ``schedules_view``, ``approval_page``, ``savings_view``); ``web.service.Dashboard`` puts
them together for the app.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

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
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.store import open_store

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from hyperpod_scheduler.store.base import StateStore

WEEK = timedelta(days=7)
ActionName = Literal["hold", "release", "stop", "start"]
ACTIONS: tuple[ActionName, ...] = ("hold", "release", "stop", "start")
FSX_CACHE_S = reports.FSX_CACHE_S


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
    def governed(self, ctx: Context, name: str) -> Governed:
        g = ctx.fleet().find(name)
        if g is None:
            raise NotFound(f"cluster: {name!r} is not governed by the config")
        return g

    def target(self, ctx: Context, name: str) -> tuple[Governed | None, ClusterRef]:
        """A governed cluster, or one the store remembers (a manual stop outside the config). For the
        pages that only read: from the shared reading of the fleet (no discovery per view of a cluster);
        an action finds its cluster afresh (``governed``)."""
        g = self._known(ctx, name)
        if g is not None:
            return g, g.ref
        for key in ctx.store.list_keys():
            if key.rsplit("/", 1)[-1] == name and not key.startswith("agent/"):
                region, _ = reports.split_key(key)
                return None, ClusterRef(key, name, region).governed(ctx.fleet().settings(OUTSIDE))
        raise NotFound(f"cluster: {name!r} is not governed by the config and not in the state store")

    def _known(self, ctx: Context, name: str) -> Governed | None:
        try:
            governed = self.looks.reading(ctx).governed
        except (ClientError, BotoCoreError, HyperpodSchedulerError):
            return ctx.fleet().find(name)  # nothing could be read: as before, said by the fleet's own reading
        found = [g for g in governed if g.ref.name == name]
        if len({(g.ref.region, g.ref.profile) for g in found}) > 1:
            return ctx.fleet().find(name)  # named twice: the fleet's own usage error says how to choose
        return found[0] if found else None

    def describe_cached(self, ctx: Context, ref: ClusterRef) -> Any:
        """DescribeCluster through the engine (answers checked), or the exception it raised, from the
        shared looks (app.looks): a look younger than their ``max_age`` (a tick's, an action's, the
        fleet refresh's), or an older one while the fleet refresh is reading it again; else read now."""
        look = self.looks.look(ref)
        if look is not None and (ctx.now() - look.at < self.looks.max_age or self.looks.refreshing):
            return look.answer
        try:
            answer: Any = ctx.engine().describe(ref)
        except (ClientError, BotoCoreError, HyperpodSchedulerError) as exc:
            answer = exc
        self.looks.keep(ref, answer, ctx.now())  # a caller's context (the HTML report) has no engine hook
        return answer

    def report(self, ctx: Context, since: datetime, until: datetime) -> Report:
        """The same computation as ``report`` on the command line (``app.report.build``)."""
        settings = self.cost or reports.cost_settings(ctx.config)
        notes: list[str] = []
        table = reports.prices(settings.prices, ctx.now(), self.aws, notes)
        return reports.build(ctx.store, table, self._systems(ctx), since, until, notes)

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

    def this_month(self, ctx: Context) -> dict[str, Any]:
        now = ctx.now()
        month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        return summary.as_document(self.report(ctx, month, now)) if now > month else {"clusters": []}


def _first_known(*answers: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return next((a for a in answers if a is not None), None)
