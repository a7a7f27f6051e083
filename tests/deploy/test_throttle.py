"""The client-side token bucket: never faster than its rate, shared by threads, slower after a throttle."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime
from types import SimpleNamespace

import boto3
import botocore.endpoint
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.deploy.throttle import (
    DECREASE,
    FLOOR_PER_S,
    INCREASE_CALLS,
    Rate,
    SagemakerLimiter,
    TokenBucket,
)
from hyperpod_scheduler.emulator import running_emulator


class Frozen:
    """A clock that moves only when a test moves it."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@settings(deadline=None, max_examples=200)
@given(
    st.floats(0.1, 20),
    st.integers(1, 5),
    st.lists(st.floats(0, 30, allow_nan=False), min_size=1, max_size=60),
)
def test_no_window_holds_more_calls_than_the_burst_and_the_rate_allow(
    rate: float, burst: int, arrivals: list[float]
) -> None:
    clock = Frozen()
    bucket = TokenBucket(Rate(rate, burst), clock=clock, sleep=lambda s: None, jitter=0)
    slots = []
    for at in sorted(arrivals):
        clock.t = at
        slots.append(at + bucket.reserve())
    assert slots == sorted(slots)
    for i in range(len(slots)):
        for j in range(i, len(slots)):
            assert j - i + 1 <= burst + (slots[j] - slots[i]) * rate + 1e-6


def test_jitter_only_spreads_callers_that_wait_and_stays_within_its_share_of_an_interval() -> None:
    clock = Frozen()
    bucket = TokenBucket(Rate(2.0, 1), clock=clock, sleep=lambda s: None, jitter=0.5, rng=random.Random(7))
    assert bucket.reserve() == 0  # a free token goes at once
    waits = [bucket.reserve() for _ in range(50)]
    for k, wait in enumerate(waits, start=1):
        assert k * 0.5 <= wait <= k * 0.5 + 0.25


def test_threads_share_one_bucket() -> None:
    clock = Frozen()
    waits: list[float] = []
    lock = threading.Lock()

    def sleep(s: float) -> None:
        with lock:
            waits.append(s)

    bucket = TokenBucket(Rate(1.0, 1), clock=clock, sleep=sleep, jitter=0)
    threads = [threading.Thread(target=bucket.acquire) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(waits) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]  # one went at once


def test_a_throttle_cuts_the_rate_once_per_interval_down_to_a_floor() -> None:
    clock = Frozen()
    bucket = TokenBucket(Rate(1.0, 1), clock=clock, sleep=lambda s: None, jitter=0)
    bucket.throttled()
    assert bucket.per_second == pytest.approx(DECREASE)
    bucket.throttled()  # the answer of a call already in flight: the same news, not a second cut
    assert bucket.per_second == pytest.approx(DECREASE)
    for _ in range(40):
        clock.t += 1 / bucket.per_second
        bucket.throttled()
    assert bucket.per_second == FLOOR_PER_S and bucket.throttles == 42
    assert Rate(1.0, 4).share(8) == Rate(0.125, 1)


def test_accepted_calls_add_the_rate_back_up_to_the_configured_one() -> None:
    clock = Frozen()
    bucket = TokenBucket(Rate(1.0, 1), clock=clock, sleep=lambda s: None, jitter=0)
    bucket.accepted()
    assert bucket.per_second == 1.0  # never above the configured rate
    bucket.throttled()
    limiter = SagemakerLimiter(updates=bucket, reads=TokenBucket(Rate(5.0, 1), clock=clock, sleep=lambda s: None))
    for _ in range(3):  # what botocore's needs-retry hook sees after an accepted call
        limiter._needs_retry(event_name="needs-retry.sagemaker.UpdateCluster", response=(None, {}))
    assert bucket.per_second == pytest.approx(DECREASE + 3 / INCREASE_CALLS)  # each: 1/20 of the throttled rate
    for _ in range(INCREASE_CALLS):
        bucket.accepted()
    assert bucket.per_second == 1.0


def test_every_attempt_of_a_throttled_call_waits_and_slows_the_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    # botocore's own backoff between attempts (up to 1 s, then 2 s of real time.sleep in botocore.endpoint,
    # the only use of time there) is not what this test is about: it is recorded instead of slept.
    backoffs: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=backoffs.append))
    waits: list[float] = []
    clock = Frozen()
    reads = TokenBucket(Rate(10.0, 1), clock=clock, sleep=waits.append, jitter=0)
    updates = TokenBucket(Rate(1.0, 1), clock=clock, sleep=waits.append, jitter=0)
    limiter = SagemakerLimiter(updates=updates, reads=reads)
    with running_emulator(virtual_start=datetime(2026, 11, 30, tzinfo=UTC), in_process=True) as emu:
        emu.faults = {"throttle_rate": 1.0}
        client = boto3.client(
            "sagemaker",
            region_name="us-east-1",
            endpoint_url=emu.endpoint,
            aws_access_key_id="x",
            aws_secret_access_key="x",
            config=Config(retries={"mode": "standard", "max_attempts": 3}),
        )
        limiter.attach(client)
        limiter.attach(client)  # attaching twice hooks once
        with pytest.raises(ClientError, match="Throttling"):
            client.describe_cluster(ClusterName="c")
    # Every attempt (botocore retried it) went through the read bucket and was counted; the clock stood
    # still, so they fell in one interval and cut the rate once.
    assert reads.calls == reads.throttles >= 3 and updates.calls == 0
    assert reads.per_second == pytest.approx(10.0 * DECREASE)
    assert limiter.throttles == reads.throttles
    assert len(backoffs) == reads.calls - 1  # botocore paused between its attempts, as it does on AWS
