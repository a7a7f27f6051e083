"""A local SageMaker HyperPod control plane speaking the AWS wire protocol (JSON 1.1) on loopback."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from hyperpod_scheduler.emulator.clock import Clock, RealClock, VirtualClock
from hyperpod_scheduler.emulator.protocol import AwsJsonApi, Faults
from hyperpod_scheduler.errors import UsageError

if TYPE_CHECKING:
    # Imported lazily at run time, so importing one model module (clock, capacity) never drags in the
    # whole backend and server, and a half-built backend cannot break the package import.
    from hyperpod_scheduler.emulator.backend import HyperPodBackend
    from hyperpod_scheduler.emulator.capacity import CapacityModel
    from hyperpod_scheduler.emulator.server import EmulatorServer
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
        self, server: EmulatorServer, api: AwsJsonApi, backend: HyperPodBackend, storage: Storage | None = None
    ) -> None:
        self._server = server
        self._api = api
        self.backend = backend
        # S3 buckets and FSx file systems beside the control plane (``storage.s3``, ``storage.fsx``).
        self.storage = storage

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

    def close(self) -> None:
        """Stop serving, then let the backend flush its state file (when it has one)."""
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
) -> Emulator:
    """Start serving in background threads; the caller must ``close()`` it (or use ``running_emulator``).

    ``omitted_members="reset"`` rehearses the unconfirmed worst case of UpdateCluster: an optional
    member an existing group's entry leaves out goes back to its default. ``check_answers`` checks
    every answer against its botocore output shape (``emulator.answer_problems``). Left as None,
    they come from ``HYPERPOD_EMULATOR_OMITTED_MEMBERS`` (default keep) and
    ``HYPERPOD_EMULATOR_CHECK_ANSWERS`` (1: on), so a whole test suite can run in either mode.
    """
    from hyperpod_scheduler.emulator.backend import HyperPodBackend
    from hyperpod_scheduler.emulator.server import AdminApi, EmulatorServer
    from hyperpod_scheduler.emulator.storage import Storage

    if virtual_start is not None and speed is not None:
        raise UsageError("emulator: give either speed (a real-time clock) or virtual_start, not both")
    if speed is not None and not speed > 0:
        raise UsageError(f"emulator: speed must be a positive number, got {speed}")
    if omitted_members is None:
        omitted_members = os.environ.get(OMITTED_MEMBERS_ENV) or "keep"
    if check_answers is None:
        check_answers = os.environ.get(CHECK_ANSWERS_ENV, "") not in ("", "0", "false", "no")
    clock: Clock = VirtualClock(virtual_start) if virtual_start is not None else RealClock(speed or 1.0)
    backend = HyperPodBackend(
        clock, capacity=_capacity(capacity), seed=seed, state_path=state_path, omitted_members=omitted_members
    )
    api = AwsJsonApi(backend, _faults(faults, seed), check_answers=check_answers)
    storage = Storage(clock, api.account, seed)
    server = EmulatorServer(api, AdminApi(backend, api, storage), host=host, port=port)
    server.start()
    return Emulator(server, api, backend, storage)


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
    )
    try:
        yield emulator
    finally:
        emulator.close()
