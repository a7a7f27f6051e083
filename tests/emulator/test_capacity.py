"""Capacity shortage as a client sees it, in both provisioning modes, with a scarce P5 pool."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.emulator.clients import T0, make_client
from tests.emulator.driving import groups_by_name, run_until, wait_status
from tests.emulator.emu_requests import create_request, update_groups_from

# Three P5s now, eight two hours after the emulator starts; CPU stays plentiful (built-in defaults).
SCARCE_P5 = {
    "instance_types": {
        "ml.p5.48xlarge": {"available": 3, "schedule": [{"at": "+2h", "available": 8}]},
    }
}


@pytest.fixture
def scarce() -> Iterator[Emulator]:
    with running_emulator(virtual_start=T0, capacity=SCARCE_P5, seed=3, check_answers=True) as emulator:
        yield emulator


def test_all_or_nothing_update_rolls_back_with_the_documented_message(scarce: Emulator) -> None:
    sm = make_client(scarce.endpoint)
    sm.create_cluster(**create_request("short", workers=2))
    described = wait_status(scarce, sm, "short", "InService")

    sm.update_cluster(ClusterName="short", InstanceGroups=update_groups_from(described, {"gpu": 5}))
    seen: set[str] = set()

    def settled() -> bool:
        status = sm.describe_cluster(ClusterName="short")["ClusterStatus"]
        seen.add(status)
        return status == "InService"

    run_until(scarce, settled)
    after = sm.describe_cluster(ClusterName="short")
    assert "RollingBack" in seen
    assert "sufficient capacity" in after["FailureMessage"]
    gpu = groups_by_name(after)["gpu"]
    assert (gpu["CurrentCount"], gpu["TargetCount"]) == (2, 2)  # back to the previous state


def test_all_or_nothing_create_fails(scarce: Emulator) -> None:
    sm = make_client(scarce.endpoint)
    sm.create_cluster(**create_request("too-big", workers=4))
    failed = wait_status(scarce, sm, "too-big", "Failed", "InService")
    assert failed["ClusterStatus"] == "Failed"
    assert "sufficient capacity" in failed["FailureMessage"]


def test_continuous_mode_serves_what_it_can_and_keeps_retrying(scarce: Emulator) -> None:
    sm = make_client(scarce.endpoint)
    sm.create_cluster(**create_request("patient", workers=5, continuous=True))
    described = wait_status(scarce, sm, "patient", "InService")
    run_until(scarce, lambda: groups_by_name(sm.describe_cluster(ClusterName="patient"))["gpu"]["CurrentCount"] >= 3)
    gpu = groups_by_name(sm.describe_cluster(ClusterName="patient"))["gpu"]
    assert (gpu["CurrentCount"], gpu["TargetCount"]) == (3, 5)
    assert described["ClusterStatus"] == "InService"

    events = [
        e for page in sm.get_paginator("list_cluster_events").paginate(ClusterName="patient") for e in page["Events"]
    ]
    assert any("sufficient capacity" in e.get("Description", "") for e in events), events
    first = events[0]
    detail = sm.describe_cluster_event(ClusterName="patient", EventId=first["EventId"])["EventDetails"]
    assert detail["EventId"] == first["EventId"]

    # Two hours in, the pool grows to eight and the retries fill the group.
    run_until(scarce, lambda: groups_by_name(sm.describe_cluster(ClusterName="patient"))["gpu"]["CurrentCount"] == 5)
    assert scarce.clock.now() - T0 >= timedelta(hours=2)
    assert sm.describe_cluster(ClusterName="patient")["ClusterStatus"] == "InService"
