"""A start short of capacity: all-or-nothing rolls back and is retried with backoff until capacity returns."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.config.model import Policy, Retry
from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.guards.capacity import CapacityGuard
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.memory import MemoryStore
from hyperpod_scheduler.store.records import ClusterRecord
from tests.engine.conftest import ROLE, START, CountingClient, settle

CAPACITY_MSG = "We currently do not have sufficient capacity for the requested instance type(s). Please try again."
REF = ref_for("g5", "us-east-1", account=DEFAULT_ACCOUNT)


def _morning(
    pool: list[dict[str, Any]], seed: int, retry: Retry
) -> tuple[Collector, ClusterRecord | None, dict[str, int]]:
    """A 4-GPU all-or-nothing cluster under office hours from Monday 06:00 to 10:00, ticking every minute,
    with the G5 pool changing as ``pool`` says. Returns the events, the record and the final counts."""
    capacity = {"instance_types": {"ml.g5.48xlarge": {"available": 4, "schedule": pool}}}
    with running_emulator(virtual_start=START, seed=seed, capacity=capacity, in_process=True) as emu:
        client = CountingClient(emu.endpoint)
        client.client.create_cluster(**slurm_request("g5", {"gpu": ("ml.g5.48xlarge", 4)}, role=ROLE))
        settle(emu, client.client, "g5")
        events = Collector()
        store = MemoryStore()
        engine = Engine(
            store,
            lambda r: client.client,
            emu.clock.now,
            events=events,
            guards_for=lambda r: [CapacityGuard(Policy())],
            retry=retry,
        )
        governed = [Governed(REF, "office", resolve("Mon-Fri 08:00-18:00 UTC", {}), False)]
        while emu.clock.now() < START + timedelta(hours=4):
            tick(engine, governed, emu.clock.now())
            emu.advance(60)
        d = client.client.describe_cluster(ClusterName="g5")
        return events, store.get(REF.key), {g["InstanceGroupName"]: g["CurrentCount"] for g in d["InstanceGroups"]}


def _starts(events: Collector) -> list[str]:
    return [e.message for e in events.events if e.kind == "sent" and e.message.startswith("start")]


def test_rollback_is_retried_with_backoff_until_capacity_returns() -> None:
    # 4 GPUs at first; at 07:00 the pool shrinks to 2 (someone took them); at 08:20 it has 8 again.
    day = START.date().isoformat()
    pool = [{"at": f"{day}T07:00:00Z", "available": 2}, {"at": f"{day}T08:20:00Z", "available": 8}]
    events, record, counts = _morning(pool, 11, Retry(deadline_minutes=120, backoff_minutes=[5, 10, 20]))
    failed = [e for e in events.events if e.kind == "failed"]
    assert failed and CAPACITY_MSG in failed[0].message and "retry 1" in failed[0].message
    assert len(_starts(events)) >= 2  # the first start and at least one retry
    assert counts == {"controller": 1, "gpu": 4}
    assert record is not None and record.retry is None and record.applied_state == "running"
    assert {o.group: o.outcome for o in record.last_outcomes} == {"controller": "restored", "gpu": "restored"}


def test_retries_stop_at_the_deadline() -> None:
    day = START.date().isoformat()
    events, record, _ = _morning(
        [{"at": f"{day}T07:00:00Z", "available": 1}], 12, Retry(deadline_minutes=30, backoff_minutes=[10])
    )
    assert any("retries exhausted" in e.message for e in events.events if e.kind == "failed")
    assert 2 <= len(_starts(events)) <= 4  # bounded by the 30-minute deadline
    assert record is not None and record.retry is None
    assert {o.group: o.outcome for o in record.last_outcomes}["gpu"] == "failed"
