"""A start short of capacity: all-or-nothing rolls back and is retried with backoff until capacity returns."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.config.model import Policy, Retry
from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.guards.capacity import CapacityGuard
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.conftest import ROLE, START, CountingClient, settle

CAPACITY_MSG = "We currently do not have sufficient capacity for the requested instance type(s). Please try again."


def _request() -> dict[str, Any]:
    return slurm_request("g5", {"gpu": ("ml.g5.48xlarge", 4)}, role=ROLE)


def test_rollback_is_retried_with_backoff_until_capacity_returns() -> None:
    # 4 GPUs at first; at 07:00 the pool shrinks to 2 (someone took them); at 08:20 it has 8 again.
    day = START.date().isoformat()
    capacity = {
        "instance_types": {
            "ml.g5.48xlarge": {
                "available": 4,
                "schedule": [{"at": f"{day}T07:00:00Z", "available": 2}, {"at": f"{day}T08:20:00Z", "available": 8}],
            }
        }
    }
    with running_emulator(virtual_start=START, seed=11, capacity=capacity) as emu:
        client = CountingClient(emu.endpoint)
        client.client.create_cluster(**_request())
        settle(emu, client.client, "g5")
        events = Collector()
        store = MemoryStore()
        engine = Engine(
            store,
            lambda r: client.client,
            emu.clock.now,
            events=events,
            guards_for=lambda r: [CapacityGuard(Policy())],
            retry=Retry(deadline_minutes=120, backoff_minutes=[5, 10, 20]),
        )
        ref = ref_for("g5", "us-east-1")
        governed = [Governed(ref, "office", resolve("Mon-Fri 08:00-18:00 UTC", {}), False)]
        end = START + timedelta(hours=4)
        while emu.clock.now() < end:
            tick(engine, governed, emu.clock.now())
            emu.advance(60)
        failed = [e for e in events.events if e.kind == "failed"]
        assert failed and CAPACITY_MSG in failed[0].message and "retry 1" in failed[0].message
        starts = [e for e in events.events if e.kind == "sent" and e.message.startswith("start")]
        assert len(starts) >= 2  # the first start and at least one retry
        d = client.client.describe_cluster(ClusterName="g5")
        assert {g["InstanceGroupName"]: g["CurrentCount"] for g in d["InstanceGroups"]} == {"controller": 1, "gpu": 4}
        record = store.get(ref.key)
        assert record is not None and record.retry is None and record.applied_state == "running"
        assert {o.group: o.outcome for o in record.last_outcomes} == {"controller": "restored", "gpu": "restored"}


def test_retries_stop_at_the_deadline() -> None:
    day = START.date().isoformat()
    capacity = {
        "instance_types": {"ml.g5.48xlarge": {"available": 4, "schedule": [{"at": f"{day}T07:00:00Z", "available": 1}]}}
    }
    with running_emulator(virtual_start=START, seed=12, capacity=capacity) as emu:
        client = CountingClient(emu.endpoint)
        client.client.create_cluster(**_request())
        settle(emu, client.client, "g5")
        events = Collector()
        store = MemoryStore()
        engine = Engine(
            store,
            lambda r: client.client,
            emu.clock.now,
            events=events,
            retry=Retry(deadline_minutes=30, backoff_minutes=[10]),
        )
        ref = ref_for("g5", "us-east-1")
        governed = [Governed(ref, "office", resolve("Mon-Fri 08:00-18:00 UTC", {}), False)]
        while emu.clock.now() < START + timedelta(hours=4):
            tick(engine, governed, emu.clock.now())
            emu.advance(60)
        assert any("retries exhausted" in e.message for e in events.events if e.kind == "failed")
        starts = [e for e in events.events if e.kind == "sent" and e.message.startswith("start")]
        assert 2 <= len(starts) <= 4  # bounded by the 30-minute deadline
        record = store.get(ref.key)
        assert record is not None and record.retry is None
        assert {o.group: o.outcome for o in record.last_outcomes}["gpu"] == "failed"
