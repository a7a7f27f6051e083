"""Two workers on one target at the same moment: each cluster is resized once, no recorded size is lost.

SQS may deliver one message twice and an orchestrator retry may queue a target twice, so this is a
real situation, not a thought experiment.
"""

from __future__ import annotations

import threading
from typing import Any

from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.deploy.handlers import orchestrator, worker
from hyperpod_scheduler.store.dynamodb import DynamoDBStore
from hyperpod_scheduler.store.records import cluster_key
from tests.deploy.conftest import SIZES, TABLE, FleetWorld, drain, store

ACCOUNT, REGION = "222222222222", "eu-west-1"
NAMES = ["a", "b", "c", "d"]
CONFIG = f"""
schedules: {{office: "Mon-Fri 08:00-18:00 UTC"}}
targets:
  - account: '{ACCOUNT}'
    region: {REGION}
    schedule: office
    clusters: [{", ".join(NAMES)}]
"""


def _twice_at_once(world: FleetWorld) -> list[dict[str, Any]]:
    """Run the same job in two workers whose ticks start together (a barrier after credentials, as each
    opens the store, before either takes a lease)."""
    orchestrator({}, None, world.runtime())
    (record,) = drain(world.queue_url)
    barrier = threading.Barrier(2, timeout=30)
    answers: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def one() -> None:
        runtime = world.runtime()

        def meet_then_open() -> DynamoDBStore:
            barrier.wait()
            return store()

        runtime.store_factory = meet_then_open
        try:
            answers.append(worker({"Records": [record]}, None, runtime))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return answers


def test_two_workers_on_one_target_act_once_per_cluster_and_keep_every_size(world: FleetWorld) -> None:
    clusters = [(ACCOUNT, REGION, n) for n in NAMES]
    for c in clusters:
        world.create(*c)
    world.settle(clusters)
    config_store.write_text(config_store.Location("dynamodb", TABLE), CONFIG)

    answers = _twice_at_once(world)
    assert answers == [{"batchItemFailures": []}] * 2
    assert {c: world.updates[c] for c in clusters} == dict.fromkeys(clusters, 1)
    sent = [line for line in world.log_lines() if line.get("outcome") == "sent"]
    assert sorted(line["cluster"] for line in sent) == NAMES
    world.settle(clusters)
    _twice_at_once(world)  # both follow the stops to their end; neither sends anything
    assert sum(world.updates.values()) == len(clusters)
    with store() as s:
        for name in NAMES:
            record = s.get(cluster_key(name, REGION, ACCOUNT))
            assert record is not None and record.applied_state == "stopped" and record.pending is None
            assert record.snapshot is not None
            assert {g: size.count for g, size in record.snapshot.sizes.items()} == SIZES

    world.advance_to(8, 5)
    world.updates.clear()
    _twice_at_once(world)
    assert {c: world.updates[c] for c in clusters} == dict.fromkeys(clusters, 1)
    world.settle(clusters)
    for c in clusters:
        assert world.counts(*c) == SIZES
