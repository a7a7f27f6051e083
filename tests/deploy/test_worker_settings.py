"""Settings that shape how the worker runs, not what it sends: tick concurrency and the lease TTL."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import boto3

from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.deploy.handlers import orchestrator, worker
from hyperpod_scheduler.store.base import lease_owner_id
from hyperpod_scheduler.store.records import cluster_key
from tests.deploy.conftest import ACCOUNTS, TABLE, FleetWorld, drain, store

ACCOUNT, REGION = ACCOUNTS[0], "us-east-1"


def _push(world: FleetWorld, clusters: list[str], defaults: str) -> None:
    for name in clusters:
        world.create(ACCOUNT, REGION, name)
    world.settle([(ACCOUNT, REGION, n) for n in clusters])
    text = (
        "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
        f"defaults: {{schedule: office, {defaults}}}\n"
        f"targets: [{{account: '{ACCOUNT}', region: {REGION}, clusters: [{', '.join(clusters)}]}}]\n"
    )
    config_store.write_text(config_store.Location("dynamodb", TABLE), text)


def _run(world: FleetWorld, on_describe: Any) -> dict[str, Any]:
    runtime = world.runtime()

    def sagemaker_for(session: boto3.Session, region: str) -> Any:
        client = world.sagemaker_for(session, region)
        client.meta.events.register("before-call.sagemaker.DescribeCluster", on_describe)
        return client

    runtime.sagemaker_for = sagemaker_for
    orchestrator({}, None, runtime)
    answer: dict[str, Any] = worker({"Records": drain(world.queue_url)}, None, runtime)
    return answer


def test_the_worker_handles_as_many_clusters_at_once_as_concurrency_says(world: FleetWorld) -> None:
    _push(world, ["a", "b"], "concurrency: 2")
    # Each DescribeCluster waits for the other: only two clusters in flight at once get past it.
    both = threading.Barrier(2, timeout=30)

    def meet(**_: Any) -> None:
        both.wait()

    assert _run(world, meet) == {"batchItemFailures": []}
    assert not both.broken
    assert set(world.updates) == {(ACCOUNT, REGION, "a"), (ACCOUNT, REGION, "b")}


def test_a_worker_holds_a_cluster_for_the_configured_lease_ttl(world: FleetWorld) -> None:
    _push(world, ["a"], "lease_ttl_seconds: 1500")
    key = cluster_key("a", REGION, ACCOUNT)
    seen: list[tuple[bool, bool]] = []

    def probe(**_: Any) -> None:
        # While the worker acts on 'a': had it died right now, when could another runner take over?
        now, other = world.now, f"{lease_owner_id()}-other"
        with store() as s:
            before = s.acquire_lease(key, other, 60, now + timedelta(seconds=1499))
            after = s.acquire_lease(key, other, 1, now + timedelta(seconds=1501))
            s.release_lease(key, other)
        seen.append((before, after))
        raise RuntimeError("stop here")  # the probe has what it needs; the cluster stays untouched

    _run(world, probe)
    assert seen and seen[0] == (False, True)  # 1,500 s from the config, not the engine's 900 s default
    assert not world.updates
