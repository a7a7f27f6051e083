"""Shared by the tests of the call deadlines (test_deadlines.py, test_watchdog.py): dummy credentials
for every test, the production client under given limits, a call run so that a deadline not kept fails
the test instead of hanging it, and a wait for every abandoned attempt to be gone."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from hyperpod_scheduler.aws import deadlines, watchdog
from hyperpod_scheduler.aws.clients import sagemaker_client
from hyperpod_scheduler.aws.deadlines import _WORKERS, BoundedSender, Deadlines

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Autouse in every module that imports it; the limits go back to the environment's afterwards."""
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    yield
    deadlines.use(None)


def bounded_client(url: str, limits: Deadlines, mode: str = "watched") -> object:
    """The SageMaker client the product builds, under ``limits``, pointed at ``url``. ``mode``
    "threads": its attempts on worker threads (the fallback where the watchdog cannot be installed)."""
    deadlines.use(limits)
    try:
        client = sagemaker_client(region="us-east-1", endpoint_url=url)
    finally:
        deadlines.use(None)
    sender = client._endpoint.http_session  # type: ignore[attr-defined]
    assert isinstance(sender, BoundedSender) and sender.watched  # what production uses
    sender.watched = mode == "watched"
    return client


def attempts_running() -> int:
    # Attempts still watched, or worker threads still running one (idle ones wait for the next).
    return watchdog.WATCHDOG.watched + _WORKERS.busy


def workers_gone(within_s: float = 5.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if attempts_running() == 0:
            return True
        time.sleep(0.05)
    return False


def raised_within(seconds: float, call: Callable[[], object]) -> BaseException | None:
    """What ``call`` raised, run on a thread so that a deadline not kept fails the test, not hangs it."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            raised.append(None)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if not raised:
        pytest.fail(f"the call was still running after {seconds:g} s: no deadline kept it")
    return raised[0]
