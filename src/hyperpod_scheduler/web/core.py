"""The dashboard's core: its settings, the per-request context, access, and the reads every page shares
(the cluster a name means, DescribeCluster cached for a minute, the cost report).

The pages themselves are plain functions in their own modules (``fleet_view``, ``cluster_view``,
``manual``, ``schedules_view``, ``approval_page``, ``savings_view``); ``web.service.Dashboard`` puts
them together for the app.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.app import report as reports
from hyperpod_scheduler.app.compose import Context, Source, chain_clients
from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.config.load import config_path, load_config
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

DESCRIBE_CACHE_S = 60.0  # the fleet page describes each cluster for its "why"; a minute-old answer will do
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
    _describe_cache: dict[str, tuple[float, Any]] = field(default_factory=dict)

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
            self._store = open_store(self.state or load_config(self.config_file).state)
        return self._store

    def close(self) -> None:
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
                accounts=src.accounts,
            )  # fmt: skip
        return Context(
            load_config(self.config_file), self.store(), chain_clients(self.client_for), self.now, actor="dashboard"
        )

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
        """A governed cluster, or one the store remembers (a manual stop outside the config)."""
        g = ctx.fleet().find(name)
        if g is not None:
            return g, g.ref
        for key in ctx.store.list_keys():
            if key.rsplit("/", 1)[-1] == name and not key.startswith("agent/"):
                region, _ = reports.split_key(key)
                return None, ClusterRef(key, name, region).governed(ctx.fleet().settings(OUTSIDE))
        raise NotFound(f"cluster: {name!r} is not governed by the config and not in the state store")

    def describe_cached(self, ctx: Context, ref: ClusterRef) -> Any:
        """DescribeCluster through the engine (answers checked), or the exception it raised; reused for
        a minute, so a fleet page does not describe every cluster on every view."""
        hit = self._describe_cache.get(ref.key)
        if hit is not None and time.monotonic() - hit[0] < DESCRIBE_CACHE_S:
            return hit[1]
        try:
            answer: Any = ctx.engine().describe(ref)
        except (ClientError, BotoCoreError, HyperpodSchedulerError) as exc:
            answer = exc
        self._describe_cache[ref.key] = (time.monotonic(), answer)
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
        return reports.FileSystemFinder(
            ctx.config,
            lambda region, profile: ctx.client_for(ClusterRef("", "", region, profile)),
            self.aws,
            cache_s=FSX_CACHE_S,
            cache=self._fsx_cache,
        )

    def this_month(self, ctx: Context) -> dict[str, Any]:
        now = ctx.now()
        month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        return summary.as_document(self.report(ctx, month, now)) if now > month else {"clusters": []}
