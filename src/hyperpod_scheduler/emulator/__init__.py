"""A local SageMaker HyperPod control plane speaking the AWS wire protocol (JSON 1.1) on loopback."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from hyperpod_scheduler.emulator.clock import Clock, RealClock, VirtualClock
from hyperpod_scheduler.emulator.protocol import AwsJsonApi, Faults, Reply
from hyperpod_scheduler.errors import UsageError

if TYPE_CHECKING:
    # Imported lazily at run time, so importing one model module (clock, capacity) never drags in the
    # whole backend and server, and a half-built backend cannot break the package import.
    from hyperpod_scheduler.emulator.backend import HyperPodBackend
    from hyperpod_scheduler.emulator.capacity import CapacityModel
    from hyperpod_scheduler.emulator.server import AdminApi, EmulatorServer
    from hyperpod_scheduler.emulator.storage import Storage

__all__ = ["Emulator", "Faults", "running_emulator", "start_emulator"]

OMITTED_MEMBERS_ENV = "HYPERPOD_EMULATOR_OMITTED_MEMBERS"
CHECK_ANSWERS_ENV = "HYPERPOD_EMULATOR_CHECK_ANSWERS"

CapacitySource: TypeAlias = "CapacityModel | Mapping[str, Any] | str | Path"


class Emulator:
    """A running emulator: ``endpoint`` for boto3, ``backend`` and ``clock`` for the test that owns it.

    ``faults`` can be mutated (``emu.faults.throttle_rate = 1.0``) or replaced (``emu.faults = Faults()``)
    while it runs; the next request sees the change.
    """

    def __init__(
        self,
        server: EmulatorServer,
        api: AwsJsonApi,
        backend: HyperPodBackend,
        storage: Storage | None = None,
        admin: AdminApi | None = None,
        settings: _Settings | None = None,
    ) -> None:
        self._server = server
        self._api = api
        self._admin = admin
        self._settings = settings
        self.backend = backend
        # S3 buckets and FSx file systems beside the control plane (``storage.s3``, ``storage.fsx``).
        self.storage = storage
        self.in_process = False

    @property
    def endpoint(self) -> str:
        return self._server.endpoint

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def clock(self) -> Clock:
        return self.backend.clock

    @property
    def faults(self) -> Faults:
        return self._api.faults

    @faults.setter
    def faults(self, value: Faults | Mapping[str, Any]) -> None:
        seed = self._api.faults.seed
        self._api.faults = value if isinstance(value, Faults) else Faults.from_mapping(value, seed=seed)

    @property
    def answer_problems(self) -> list[str]:
        """With ``check_answers``: every way an answer broke its botocore output shape (empty is good)."""
        return list(self._api.answer_problems)

    def advance(self, seconds: float) -> None:
        """Move a virtual clock forward and process what fell due (UsageError on a real-time clock)."""
        clock = self.clock
        if not isinstance(clock, VirtualClock):
            raise UsageError("advance: this emulator runs on a real-time clock (started without virtual_start)")
        clock.advance(seconds)
        self.backend.process_due()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stop the real-time clock inside the block: whatever is provisioning or terminating stays
        exactly where it is (a virtual clock is still between ``advance`` calls anyway)."""
        clock = self.clock
        if not isinstance(clock, RealClock):
            yield
            return
        clock.pause()
        try:
            yield
        finally:
            clock.resume()

    def answer(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """The answer to one request, exactly as the HTTP server would give it (``server.route``)."""
        from hyperpod_scheduler.emulator.server import route

        if self._admin is None:
            raise UsageError("emulator: this one was not built by start_emulator and cannot answer in process")
        return route(self._api, self._admin, method, path, headers, body)

    def answer_in_process(self) -> None:
        """From now on botocore in this process reaches this emulator without the socket (see
        ``in_process``); everything else still comes over HTTP. Undone by ``close()``."""
        from hyperpod_scheduler.emulator import in_process

        in_process.answer_at(self._netloc(), self.answer)
        self.in_process = True

    def renew(self) -> None:
        """A new control plane behind the same endpoint, as ``start_emulator`` built it: no clusters, the
        clock at its start, the seed's first draw, the given faults and capacity, empty storage. What a
        test changed on the last one (its faults, its capacity, a wrapped ``backend.dispatch``) goes with
        it, so one served emulator can stand in for a fresh one per test."""
        if self._settings is None or self._admin is None:
            raise UsageError("emulator: this one was not built by start_emulator and cannot be renewed")
        if self._settings.state_path is not None:
            raise UsageError("emulator: one with a state file keeps its clusters there; start a new one instead")
        backend, api, storage, admin = _parts(self._settings)
        old = self.backend
        self._server.serve(api, admin)
        self._api, self._admin, self.backend, self.storage = api, admin, backend, storage
        old.close()

    def _netloc(self) -> str:
        return self.endpoint.split("://", 1)[1]

    def close(self) -> None:
        """Stop serving, then let the backend flush its state file (when it has one)."""
        if self.in_process:
            from hyperpod_scheduler.emulator import in_process

            in_process.stop_answering(self._netloc())
            self.in_process = False
        self._server.close()
        self.backend.close()


def _capacity(source: CapacitySource | None) -> CapacityModel | None:
    from hyperpod_scheduler.emulator.capacity import CapacityModel

    if source is None or isinstance(source, CapacityModel):
        return source
    if isinstance(source, str | Path):
        return CapacityModel.from_yaml(source)
    return CapacityModel.from_dict(dict(source))


def _faults(source: Faults | Mapping[str, Any] | None, seed: int) -> Faults:
    if source is None:
        return Faults(seed=seed)
    if isinstance(source, Faults):
        return source
    return Faults.from_mapping(source, seed=seed)


def start_emulator(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    speed: float | None = None,
    virtual_start: datetime | None = None,
    capacity: CapacitySource | None = None,
    seed: int = 0,
    state_path: str | Path | None = None,
    faults: Faults | Mapping[str, Any] | None = None,
    omitted_members: str | None = None,
    check_answers: bool | None = None,
    in_process: bool = False,
) -> Emulator:
    """Start serving in background threads; the caller must ``close()`` it (or use ``running_emulator``).

    ``omitted_members="reset"`` rehearses the unconfirmed worst case of UpdateCluster: an optional
    member an existing group's entry leaves out goes back to its default. ``check_answers`` checks
    every answer against its botocore output shape (``emulator.answer_problems``). Left as None,
    they come from ``HYPERPOD_EMULATOR_OMITTED_MEMBERS`` (default keep) and
    ``HYPERPOD_EMULATOR_CHECK_ANSWERS`` (1: on), so a whole test suite can run in either mode.
    ``in_process``: botocore in this process is answered without the socket (``answer_in_process``).
    """
    from hyperpod_scheduler.emulator.server import EmulatorServer

    if virtual_start is not None and speed is not None:
        raise UsageError("emulator: give either speed (a real-time clock) or virtual_start, not both")
    if speed is not None and not speed > 0:
        raise UsageError(f"emulator: speed must be a positive number, got {speed}")
    if omitted_members is None:
        omitted_members = os.environ.get(OMITTED_MEMBERS_ENV) or "keep"
    if check_answers is None:
        check_answers = os.environ.get(CHECK_ANSWERS_ENV, "") not in ("", "0", "false", "no")
    given = _faults(faults, seed)
    settings = _Settings(
        speed, virtual_start, _capacity(capacity), seed, state_path, given.as_dict(), omitted_members, check_answers
    )
    backend, api, storage, admin = _parts(settings, given)
    server = EmulatorServer(api, admin, host=host, port=port)
    server.start()
    emulator = Emulator(server, api, backend, storage, admin, settings)
    if in_process:
        emulator.answer_in_process()
    return emulator


@dataclass(frozen=True)
class _Settings:
    """What ``start_emulator`` was given, resolved: enough to build the same emulator again (``renew``)."""

    speed: float | None
    virtual_start: datetime | None
    capacity: CapacityModel | None
    seed: int
    state_path: str | Path | None
    faults: Mapping[str, Any]
    omitted_members: str
    check_answers: bool


def _parts(settings: _Settings, faults: Faults | None = None) -> tuple[HyperPodBackend, AwsJsonApi, Storage, AdminApi]:
    from hyperpod_scheduler.emulator.backend import HyperPodBackend
    from hyperpod_scheduler.emulator.server import AdminApi
    from hyperpod_scheduler.emulator.storage import Storage

    start, speed = settings.virtual_start, settings.speed
    clock: Clock = VirtualClock(start) if start is not None else RealClock(speed or 1.0)
    backend = HyperPodBackend(
        clock,
        capacity=settings.capacity,
        seed=settings.seed,
        state_path=settings.state_path,
        omitted_members=settings.omitted_members,
    )
    if faults is None:
        faults = Faults.from_mapping(settings.faults, seed=settings.seed)
    api = AwsJsonApi(backend, faults, check_answers=settings.check_answers)
    storage = Storage(clock, api.account, settings.seed)
    return backend, api, storage, AdminApi(backend, api, storage)


@contextmanager
def running_emulator(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    speed: float | None = None,
    virtual_start: datetime | None = None,
    capacity: CapacitySource | None = None,
    seed: int = 0,
    state_path: str | Path | None = None,
    faults: Faults | Mapping[str, Any] | None = None,
    omitted_members: str | None = None,
    check_answers: bool | None = None,
    in_process: bool = False,
) -> Iterator[Emulator]:
    """An emulator serving on ``host:port`` (0: a free port) for the duration of the ``with`` block.

    With ``virtual_start`` the clock is a ``VirtualClock`` that only moves when told to (``advance``);
    otherwise real time scaled by ``speed`` (default 1.0).
    """
    emulator = start_emulator(
        host=host,
        port=port,
        speed=speed,
        virtual_start=virtual_start,
        capacity=capacity,
        seed=seed,
        state_path=state_path,
        faults=faults,
        omitted_members=omitted_members,
        check_answers=check_answers,
        in_process=in_process,
    )
    try:
        yield emulator
    finally:
        emulator.close()
