"""The fleet seen from an operator's laptop: ``--config dynamodb://TABLE[?region=R]``.

The hub's table holds the pushed fleet config (``config push``) and every cluster's state. Given that
location instead of a file, every command and the dashboard read the pushed config, keep state in the
same table (where the workers read holds and approvals), and reach each target as the workers do: by
assuming its ``role_arn`` (default: the hub's spoke role) in its account and region, with the
operator's own credentials for STS. Each target's clusters are reached under a *profile* named by
the target's account, so ``hold NAME --profile 222222222222`` picks one of two same-named clusters.

Built here (the launcher, which may use the deploy modules) and handed to the composition root as a
``Source``; the dashboard gets the same ``Source`` from the launcher.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from hyperpod_scheduler.app.compose import Clients, Pause, Source
from hyperpod_scheduler.engine.ref import ClusterRef
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store.records import Reach

SCHEME = "dynamodb://"

# (assumed session, region) -> SageMaker client: AWS's own endpoint, or a test's emulator.
SagemakerIn = Callable[[Any, str], Any]


def is_fleet_location(config: str | None) -> bool:
    return bool(config) and str(config).startswith(SCHEME)


def _sagemaker_in(session: Any, region: str) -> Any:
    return session.client("sagemaker", region_name=region)


def _pause(
    by_stack: bool, stack_since: datetime | None, by_config: bool, version: int, pushed: datetime | None
) -> Pause | None:
    """The fleet's pause as the laptop can know it: the stack's ``SchedulingActive`` only from the
    orchestrator's record in the table (it is in the functions' environment alone), ``hub.paused`` from
    the pushed config itself; since the earlier of the two when both hold."""
    settings: list[tuple[str, datetime | None]] = []
    if by_stack:
        settings.append(("the stack parameter SchedulingActive=No (as the orchestrator recorded it)", stack_since))
    if by_config:
        settings.append((f"the fleet config's hub.paused (config version {version})", pushed))
    if not settings:
        return None
    known = [at for _, at in settings if at is not None]
    return Pause(" and ".join(by for by, _ in settings), min(known) if known else None)


def fleet_source(location_text: str, state: str | None = None, sagemaker_in: SagemakerIn | None = None) -> Source:
    """The pushed fleet config of the table at ``location_text``, its store, and the targets' roles."""
    from hyperpod_scheduler.aws.clients import aws_client
    from hyperpod_scheduler.deploy import config_store, credentials, pause_record
    from hyperpod_scheduler.deploy.fleet_config import FleetTarget, parse_fleet_yaml
    from hyperpod_scheduler.store import open_store

    location = config_store.parse_location(location_text)
    if location.scheme != "dynamodb":  # parse_location accepts s3:// too; the state lives in the table
        raise UsageError(f"--config '{location_text}': a fleet view reads the hub's table: dynamodb://TABLE")
    if state not in (None, "", location_text):
        raise UsageError(
            f"--state '{state}': a fleet view keeps state in the hub's table {location.name} (where the workers "
            "read holds and approvals); drop --state"
        )
    text, version, pushed = config_store.read_stamped(location)
    fleet = parse_fleet_yaml(text, f"fleet config {location}")
    reach: dict[tuple[str, str], FleetTarget] = {}
    targets = []
    for target, plain in zip(fleet.targets, fleet.as_config().targets, strict=True):
        reach[(target.account, target.region)] = target
        # The account is the profile: how this face tells two accounts' same-named clusters apart.
        targets.append(plain.model_copy(update={"profile": target.account}))
    config = fleet.as_config().model_copy(update={"targets": targets})
    sessions: dict[tuple[str, str], Any] = {}
    made: dict[tuple[str, str, str], Any] = {}
    lock = threading.Lock()
    make = sagemaker_in or _sagemaker_in

    def client(service: str, ref: ClusterRef) -> Any:
        place = (ref.profile or "", ref.region or "")
        target = reach.get(place)
        if target is None:
            raise UsageError(
                f"cluster {ref.name}: account {place[0] or '(none)'} region {place[1] or '(none)'} is no target "
                f"of the fleet config in {location} (pass --profile ACCOUNT of one of its targets)"
            )
        with lock:  # one assumed session per target, one client per service, for all threads
            if place not in sessions:
                sts = aws_client("sts", None, target.region)
                sessions[place] = credentials.assume(sts, fleet.role_for(target), target.account, target.region)
            key = (service, *place)
            if key not in made:
                session = sessions[place]
                made[key] = make(session, target.region) if service == "sagemaker" else session.client(service)
            return made[key]

    hub_clients = Clients(
        sagemaker=lambda ref: client("sagemaker", ref),
        s3=lambda ref: client("s3", ref),
        sns=lambda region: aws_client("sns", None, region or location.region),
        pricing=lambda: aws_client("pricing", None, "us-east-1"),
    )
    recorded = pause_record.read(config_store.boto3_client("dynamodb", location.region), location.name)
    paused = _pause(recorded.by_stack if recorded else False, recorded.since if recorded else None,
                    fleet.hub.paused, version, pushed)  # fmt: skip
    store = open_store(str(location))

    def accounts(how: Reach) -> str | None:
        # A target's clusters are reached under its account's name: the fleet config says which it is.
        return how.profile if (how.profile, how.region) in reach else store.account_for(how)

    return Source(config, store, hub_clients, paused, accounts)
