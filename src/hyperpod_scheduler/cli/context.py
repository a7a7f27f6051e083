"""Wiring shared by the scheduler commands: config, store, clients, clock and the event printer."""

from __future__ import annotations

import getpass
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_scheduler.aws.clients import sagemaker_client, session
from hyperpod_scheduler.cli.output import console, err_console
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.cost.prices import PriceTable
from hyperpod_scheduler.cost.sources import resolve as resolve_prices
from hyperpod_scheduler.engine.events import Event, Sink
from hyperpod_scheduler.engine.fleet import Fleet
from hyperpod_scheduler.engine.runner import ClusterRef, Engine
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.guards.base import StopGuard
from hyperpod_scheduler.guards.capacity import CapacityGuard
from hyperpod_scheduler.guards.checkpoints import CheckpointGuard
from hyperpod_scheduler.notify.channels import Notifier, channels_from
from hyperpod_scheduler.store import open_store

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from hyperpod_scheduler.store.base import StateStore

STYLE = {
    "sent": "bold cyan",
    "settled": "green",
    "failed": "bold red",
    "error": "red",
    "skip": "yellow",
    "noop": "dim",
    "dry-run": "magenta",
    "progress": "blue",
    "note": "white",
}


def parse_instant(text: str, field: str) -> datetime:
    """ISO 8601; a missing offset means UTC."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{field}: {text!r} is not an ISO 8601 date-time (e.g. 2026-12-01T08:00+01:00)") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def printer(as_json: bool) -> Sink:
    def emit(event: Event) -> None:
        if as_json:
            return
        style = STYLE.get(event.kind, "white")
        console.print(
            f"[dim]{event.at:%a %Y-%m-%d %H:%M}Z[/] [bold]{event.cluster}[/] [{style}]{event.kind}[/] {event.message}",
            highlight=False,
            soft_wrap=True,
        )

    return emit


@dataclass
class Context:
    config: Config
    store: StateStore
    now: Callable[[], datetime]
    events: Sink
    _clients: dict[tuple[str | None, str | None], SageMakerClient] = field(default_factory=dict)
    _fleet: Fleet | None = None
    _prices: PriceTable | None = None

    def client_for(self, ref: ClusterRef) -> SageMakerClient:
        """One client per region and profile for this command (clients are thread-safe and reusable)."""
        key = (ref.region, ref.profile)
        if key not in self._clients:
            self._clients[key] = sagemaker_client(profile=ref.profile, region=ref.region)
        return self._clients[key]

    def guards_for(self, ref: ClusterRef, include_protected: bool = False) -> list[StopGuard]:
        policy = self.fleet().policy_for(ref)
        guards: list[StopGuard] = [CapacityGuard(policy, include_protected)]
        checkpoints = self.fleet().checkpoints_for(ref)
        if checkpoints is not None:
            s3 = (
                session(profile=ref.profile, region=ref.region).client("s3")
                if (checkpoints.channel or "").startswith("s3://")
                else None
            )
            guards.append(
                CheckpointGuard.for_cluster(checkpoints, keep_slurm_head=policy.keep_slurm_head, s3_client=s3)
            )
        return guards

    def engine(self, actor: str | None = None, include_protected: bool = False) -> Engine:
        timeout = timedelta(minutes=self.config.defaults.settle_timeout_minutes)
        return Engine(
            self.store,
            self.client_for,
            self.now,
            events=self.events,
            actor=actor or _whoami(),
            settle_timeout=timeout,
            guards_for=lambda ref: self.guards_for(ref, include_protected),
            retry=self.config.defaults.retry,
            lease_ttl_s=self.config.defaults.lease_ttl_seconds,
            policy_for=lambda ref: self.fleet().policy_for(ref),
        )

    def prices(self) -> PriceTable:
        """Bundled prices, the Price List API when the config enables it, the user's override file last."""
        if self._prices is None:
            self._prices = resolve_prices(
                self.config.cost.prices, self.now(), lambda: session(region="us-east-1").client("pricing")
            )
        return self._prices

    def fleet(self) -> Fleet:
        if self._fleet is None:
            self._fleet = Fleet(self.config, self.client_for, self.store.account_for)
        return self._fleet


def make_context(config_path: str | None, state: str | None, as_json: bool, at: str | None = None) -> Context:
    config = load_config(config_path)
    store = open_store(state or config.state)
    fixed = parse_instant(at, "--at") if at else None
    now: Callable[[], datetime] = (lambda: fixed) if fixed else (lambda: datetime.now(UTC))
    channels = channels_from(config.notifications, lambda region: session(region=region).client("sns"))
    events: Sink = printer(as_json)
    if channels:
        events = Notifier(channels, on_error=lambda m: err_console.print(f"warning: {m}", markup=False), forward=events)
    return Context(config, store, now, events)


def _whoami() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return "unknown"
