"""A client-side token bucket for SageMaker calls, one per (account, region) and kind of call.

AWS publishes no request rate for UpdateCluster or DescribeCluster; it throttles. A worker that sends
25 updates in one second to one account and region meets ThrottlingException, botocore's retries run
out and the clusters fail. So every SageMaker call of a worker run waits for a token first: updates and
reads have their own bucket (reads are cheaper for AWS and far more frequent), every thread of the run
shares them, and each wait gets a little random jitter so threads and workers do not fire in lockstep.

The rate adapts to what AWS accepts (additive increase, multiplicative decrease): a throttled answer
cuts the bucket's rate by ``DECREASE`` (once per interval: the answers of calls already in flight
when the first came back say the same thing again, and halving for each sent the rate to the floor),
never below ``FLOOR_PER_S``; each accepted call adds back ``1 / INCREASE_CALLS`` of the rate it was
throttled at, never above the configured rate. So a run that starts too fast settles just under what
AWS allows instead of crawling at a fraction of it for the rest of the run.

The bucket hands out reservations: a caller takes the next free slot under the lock and sleeps
outside it, so waiting never blocks another thread's bookkeeping, and ``clock``/``sleep`` can be a
simulated clock (bench/fleet_wave_bench.py drives the real worker through it).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FLOOR_PER_S = 1 / 60  # one call a minute: slower than this a throttled run had better end and retry
THROTTLE_CODES = frozenset(
    {"ThrottlingException", "Throttling", "ThrottledException", "TooManyRequestsException", "RequestLimitExceeded"}
)
# Operations that change a cluster share the update bucket; everything else is a read.
UPDATES = frozenset(
    {"UpdateCluster", "BatchAddClusterNodes", "BatchDeleteClusterNodes", "CreateCluster", "DeleteCluster"}
)
HOOK_ID = "hyperpod-scheduler-rate"
DECREASE = 0.7  # a throttled answer: the rate times this
INCREASE_CALLS = 20  # accepted calls to climb back from a throttle to the rate that was throttled


@dataclass(frozen=True)
class Rate:
    """Calls per second and how many may go at once after a quiet spell."""

    per_second: float
    burst: int = 1

    def share(self, parts: int) -> Rate:
        """This rate split evenly between ``parts`` workers that run at once on the same account and region."""
        parts = max(1, parts)
        return Rate(max(FLOOR_PER_S, self.per_second / parts), max(1, self.burst // parts))


class TokenBucket:
    """Thread-safe; ``acquire`` blocks (through ``sleep``) until the caller's slot comes."""

    def __init__(
        self,
        rate: Rate,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        jitter: float = 0.1,
        rng: random.Random | None = None,
    ) -> None:
        if not rate.per_second > 0:
            raise ValueError(f"rate must be positive, got {rate.per_second}")
        self.per_second = rate.per_second
        self.ceiling = rate.per_second  # the configured rate: never exceeded
        self._step = 0.0  # the additive increase per accepted call (0 until the first throttle)
        self._calm_at = float("-inf")  # throttles before this belong to the last decrease
        self.burst = max(1, rate.burst)
        self.jitter = max(0.0, jitter)
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        # The instant from which the bucket is full again: a slot is handed out at max(now, _next - burst gap).
        self._next = clock() - self.burst / self.per_second
        self.waited_s = 0.0
        self.calls = 0
        self.throttles = 0

    def reserve(self) -> float:
        """Take the next slot; returns how long the caller must wait for it (seconds, >= 0)."""
        with self._lock:
            now = self._clock()
            interval = 1.0 / self.per_second
            earliest = max(self._next, now - (self.burst - 1) * interval)
            self._next = earliest + interval
            wait = max(0.0, earliest - now)
            if wait > 0:  # only a caller that waits anyway is spread out; a free token goes at once
                wait += self._rng.uniform(0.0, self.jitter * interval)
            self.calls += 1
            self.waited_s += wait
            return wait

    def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            self._sleep(wait)

    def throttled(self) -> None:
        """AWS said slow down: cut the rate (once per interval, down to the floor) and push the next slot out."""
        with self._lock:
            self.throttles += 1
            now = self._clock()
            if now >= self._calm_at:
                self._step = max(self._step, self.per_second / INCREASE_CALLS)
                self.per_second = max(FLOOR_PER_S, self.per_second * DECREASE)
                self._calm_at = now + 1.0 / self.per_second
            self._next = max(self._next, now) + 1.0 / self.per_second

    def accepted(self) -> None:
        """AWS took a call: creep back up towards the configured rate."""
        with self._lock:
            if self._step:
                self.per_second = min(self.ceiling, self.per_second + self._step)


class SagemakerLimiter:
    """The two buckets of one worker run in one account and region, hooked into every client it hands out."""

    def __init__(self, updates: TokenBucket, reads: TokenBucket, on_call: Callable[[], None] | None = None) -> None:
        self.updates = updates
        self.reads = reads
        self._on_call = on_call  # after each token: the run is alive (deploy.markers.Claim.beat)

    def bucket_for(self, operation: str) -> TokenBucket:
        return self.updates if operation in UPDATES else self.reads

    def attach(self, client: Any) -> Any:
        """Every attempt (retries included) of every SageMaker call of ``client`` waits for its token."""
        events = getattr(getattr(client, "meta", None), "events", None)
        if events is None:
            return client
        events.register("before-send.sagemaker", self._before_send, unique_id=f"{HOOK_ID}-send-{id(self)}")
        events.register("needs-retry.sagemaker", self._needs_retry, unique_id=f"{HOOK_ID}-retry-{id(self)}")
        return client

    def _before_send(self, event_name: str = "", **_: Any) -> None:
        self.bucket_for(event_name.rsplit(".", 1)[-1]).acquire()
        if self._on_call is not None:
            self._on_call()

    def _needs_retry(self, event_name: str = "", response: Any = None, **_: Any) -> None:
        if not isinstance(response, tuple) or len(response) < 2 or not isinstance(response[1], dict):
            return None
        code = response[1].get("Error", {}).get("Code", "")
        bucket = self.bucket_for(event_name.rsplit(".", 1)[-1])
        if code in THROTTLE_CODES:
            bucket.throttled()
        elif not code:
            bucket.accepted()
        return None  # botocore's own retry policy decides whether and when to retry

    @property
    def throttles(self) -> int:
        return self.updates.throttles + self.reads.throttles

    @property
    def waited_s(self) -> float:
        return self.updates.waited_s + self.reads.waited_s
