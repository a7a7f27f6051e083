"""Clocks, and the backend under concurrent callers."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

import pytest

from hyperpod_scheduler.emulator.clock import RealClock, VirtualClock
from tests.emulator_model.helpers import T0, backend, clock, cluster_request, describe, wait_status


def test_virtual_clock_moves_only_forward() -> None:
    virtual = VirtualClock(T0)
    assert virtual.advance(90) == T0 + timedelta(seconds=90)
    assert virtual.set(T0 + timedelta(days=7)) == T0 + timedelta(days=7)
    with pytest.raises(ValueError, match="backwards"):
        virtual.set(T0)
    with pytest.raises(ValueError, match="backwards"):
        virtual.advance(-1)
    with pytest.raises(ValueError, match="timezone-aware"):
        VirtualClock(datetime(2026, 1, 1))


def test_real_clock_is_aware_monotonic_and_scaled_from_its_start() -> None:
    real = RealClock(speed=600, start=T0)
    first = real.now()
    second = real.now()
    assert first.tzinfo is not None and T0 <= first <= second
    with pytest.raises(ValueError, match="positive"):
        RealClock(speed=0)


def test_a_paused_real_clock_stands_still_and_resumes_where_it_stood() -> None:
    real = RealClock(speed=100, start=T0)
    real.pause()
    frozen = real.now()
    time.sleep(0.6)  # 60 s on this clock, were it running
    assert real.paused and real.now() == frozen
    real.pause()  # pausing twice keeps the first instant
    assert real.now() == frozen
    real.resume()
    assert not real.paused
    after = real.now()
    assert frozen <= after < frozen + timedelta(seconds=30)  # the paused stretch did not count
    real.resume()  # resuming a running clock changes nothing
    assert real.now() >= after


def test_a_week_jump_applies_every_change_in_order() -> None:
    b = backend(seed=8)
    b.dispatch("CreateCluster", cluster_request())
    clock(b).set(T0 + timedelta(days=7))
    assert describe(b)["ClusterStatus"] == "InService"
    assert b.next_event_time() is None


def test_concurrent_callers_are_serialised() -> None:
    b = backend(seed=9)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            b.dispatch("CreateCluster", cluster_request(f"c{i}"))
            for _ in range(50):
                b.dispatch("DescribeCluster", {"ClusterName": f"c{i}"})
                b.dispatch("ListClusters", {"MaxResults": 5})
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    arns = {describe(b, f"c{i}")["ClusterArn"] for i in range(8)}
    assert len(arns) == 8
    for i in range(8):
        wait_status(b, "InService", f"c{i}")
