"""What a quiet tick (nothing due) costs the hub's table: counted at the DynamoDB client."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.deploy.handlers import orchestrator, worker
from tests.deploy.conftest import ACCOUNTS, TABLE, FleetWorld, drain

ACCOUNT, HERE = ACCOUNTS[0], "us-east-1"


def test_a_quiet_tick_reads_each_record_once_and_writes_its_marker_three_times(world: FleetWorld) -> None:
    names = ["a", "b", "c"]
    for name in names:
        world.create(ACCOUNT, HERE, name)
    world.settle([(ACCOUNT, HERE, n) for n in names])
    config_store.write_text(
        config_store.Location("dynamodb", TABLE),
        "schedules: {office: 'Mon-Fri 06:00-18:00 UTC'}\ndefaults: {schedule: office}\n"
        f"targets: [{{account: '{ACCOUNT}', region: {HERE}, clusters: [{', '.join(names)}]}}]\n",
    )
    runtime = world.runtime()
    world.advance_to(10, 0)
    orchestrator({}, None, runtime)
    worker({"Records": drain(world.queue_url)}, None, runtime)  # first sight: records written
    reads: Counter[str] = Counter()
    marker_writes: list[str] = []
    real = runtime.client_for

    def client_for(service: str, region: str | None) -> Any:
        client = real(service, region)
        if service == "dynamodb":

            def seen(params: dict[str, Any], **_: Any) -> None:
                reads[params["Key"]["pk"]["S"]] += 1

            def wrote(params: dict[str, Any], event_name: str, **_: Any) -> None:
                pk = params.get("Item", params.get("Key", {})).get("pk", {}).get("S", "")
                if pk.startswith("queue#"):
                    marker_writes.append(event_name.rsplit(".", 1)[-1])

            client.meta.events.register("provide-client-params.dynamodb.GetItem", seen)
            for op in ("PutItem", "UpdateItem", "DeleteItem"):
                client.meta.events.register(f"provide-client-params.dynamodb.{op}", wrote)
        return client

    runtime.client_for = client_for
    runtime.store_factory = None  # the worker's store through the counted client too
    runtime.monotonic = lambda: 0.0  # the run's clock stands still: no renewal of its claim is due
    world.advance(60)
    orchestrator({}, None, runtime)
    assert worker({"Records": drain(world.queue_url)}, None, runtime) == {"batchItemFailures": []}
    assert not world.updates  # nothing was due
    records = {k: n for k, n in reads.items() if k.startswith("rec#")}
    assert set(records) == {f"rec#{ACCOUNT}/{HERE}/{n}" for n in names}
    # Its turn reads it; the SavedInstances metric counts from what the turn saw, reading nothing more.
    assert records == dict.fromkeys(records, 1)  # before: read again for the SavedInstances metric
    # The part's marker: claimed as queued (one write, not a claim and then a mark), taken, released.
    assert marker_writes == ["PutItem", "UpdateItem", "DeleteItem"]
