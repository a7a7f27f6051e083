"""The fan-out through the real handlers (moto, emulators): nothing queued twice, failures retried with a
backoff and then dead-lettered, clusters deferred near the timeout, the token bucket shared by the run."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import boto3
import pytest

from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.deploy.handlers import Runtime, orchestrator, worker
from hyperpod_scheduler.deploy.markers import Markers
from tests.deploy.conftest import ACCOUNTS, TABLE, FleetWorld, drain
from tests.store.dynamodb_mock import REGION

ACCOUNT, HERE = ACCOUNTS[0], "us-east-1"


def _push(world: FleetWorld, clusters: list[str], *, create: list[str] | None = None, extra: str = "") -> None:
    for name in create if create is not None else clusters:
        world.create(ACCOUNT, HERE, name)
    world.settle([(ACCOUNT, HERE, n) for n in (create if create is not None else clusters)])
    text = (
        "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
        "defaults: {schedule: office}\n"
        f"targets: [{{account: '{ACCOUNT}', region: {HERE}, clusters: [{', '.join(clusters)}]}}]\n" + extra
    )
    config_store.write_text(config_store.Location("dynamodb", TABLE), text)


def _receive(world: FleetWorld) -> list[dict[str, Any]]:
    """What the event source hands a worker: with the receipt handle and the receive count."""
    sqs = boto3.client("sqs", region_name=REGION)
    got = sqs.receive_message(
        QueueUrl=world.queue_url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["ApproximateReceiveCount"]
    ).get("Messages", [])
    return [
        {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
         "attributes": m.get("Attributes", {})}
        for m in got
    ]  # fmt: skip


def _metrics(world: FleetWorld, name: str) -> list[Any]:
    return [line[name] for line in world.log_lines() if name in line]


def test_a_part_queued_or_in_flight_is_not_queued_again(world: FleetWorld) -> None:
    _push(world, ["a"])
    runtime = world.runtime()
    first = orchestrator({}, None, runtime)
    again = orchestrator({}, None, runtime)  # the next minute: the message is still on the queue
    assert (first["queued"], again["queued"], again["in_flight"]) == (1, 0, 1)
    records = drain(world.queue_url)
    assert len(records) == 1
    assert orchestrator({}, None, runtime)["queued"] == 0  # in a worker's hands: still not again
    assert worker({"Records": records}, None, runtime) == {"batchItemFailures": []}
    assert orchestrator({}, None, runtime)["queued"] == 1  # done: the next tick queues it again
    assert _metrics(world, "PartsInFlight") == [0, 1, 1, 0]


def test_a_part_whose_message_was_lost_is_queued_again_once_its_marker_lapses(world: FleetWorld) -> None:
    _push(world, ["a"])
    runtime = world.runtime()
    orchestrator({}, None, runtime)
    drain(world.queue_url)  # gone (a purged queue, a worker killed before it marked the part running)
    assert orchestrator({}, None, runtime)["queued"] == 0
    world.advance(runtime.queued_s + 60)
    assert orchestrator({}, None, runtime)["queued"] == 1


class FailingFirstSend:
    """SQS refuses the first entry of every batch (a throttled or oversized entry)."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        answer = self.real.send_message_batch(QueueUrl=QueueUrl, Entries=Entries[1:]) if Entries[1:] else {}
        return {**answer, "Failed": [{"Id": Entries[0]["Id"], "Code": "Throttled", "Message": "slow down"}]}


def test_a_part_sqs_refused_is_given_back_for_the_next_tick(world: FleetWorld) -> None:
    _push(world, ["a"])
    runtime = world.runtime()
    real = runtime.client_for
    runtime.client_for = lambda service, region: (
        FailingFirstSend(real(service, region)) if service == "sqs" else real(service, region)
    )
    summary = orchestrator({}, None, runtime)
    assert (summary["queued"], summary["not_queued"]) == (0, 1)
    assert _metrics(world, "PartsNotQueued") == [1]  # alarmed in the hub
    runtime.client_for = real
    assert orchestrator({}, None, runtime)["queued"] == 1  # its marker was released, not left to lapse


def test_a_job_whose_every_cluster_fails_is_retried_with_a_backoff_then_dead_lettered(world: FleetWorld) -> None:
    _push(world, ["ghost", "phantom"], create=[])  # neither exists: every cluster of the job fails
    runtime = world.runtime()
    runtime.retry_backoff_s = 40
    orchestrator({}, None, runtime)
    (record,) = _receive(world)
    failed = {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert worker({"Records": [record]}, None, runtime) == failed
    line = next(x for x in world.log_lines() if "SQS retries it in" in x.get("message", ""))
    assert "every one of 2 cluster(s) failed; SQS retries it in 40 s" in line["message"] and line["attempt"] == 1
    # The worker shortened the message's invisibility to the backoff (the queue's own is 6 x the timeout).
    assert _receive(world) == []
    assert orchestrator({}, None, runtime)["in_flight"] == 1  # its marker holds while it waits for the retry

    job_key = json.loads(record["body"])
    last = {**record, "attributes": {"ApproximateReceiveCount": str(runtime.max_receives)}}
    world.out.clear()
    assert worker({"Records": [last]}, None, runtime)["batchItemFailures"] == [{"itemIdentifier": record["messageId"]}]
    assert any("to the DLQ" in x.get("message", "") for x in world.log_lines())
    # SQS moves it to the dead-letter queue now; the part is free for a fresh message at the next tick.
    markers = Markers(boto3.client("dynamodb", region_name=REGION), TABLE)
    assert markers.held([f"{job_key['account']}/{job_key['region']}/0of1"], world.now) == {}


def test_a_job_with_some_clusters_failing_succeeds_and_counts_them(world: FleetWorld) -> None:
    _push(world, ["ghost", "a"], create=["a"])
    runtime = world.runtime()
    orchestrator({}, None, runtime)
    assert worker({"Records": drain(world.queue_url)}, None, runtime) == {"batchItemFailures": []}
    assert _metrics(world, "Failures") == [1] and _metrics(world, "Actions") == [1]


class Context:
    def __init__(self, left_s: float) -> None:
        self.left_s = left_s

    def get_remaining_time_in_millis(self) -> int:
        return int(self.left_s * 1000)


def test_clusters_are_deferred_not_started_when_the_run_is_near_its_timeout(world: FleetWorld) -> None:
    _push(world, ["a", "b"])
    runtime = world.runtime()
    orchestrator({}, None, runtime)
    answer = worker({"Records": drain(world.queue_url)}, Context(30), runtime)
    assert answer == {"batchItemFailures": []}  # nothing failed: the next tick picks them up
    assert not world.updates
    assert _metrics(world, "Deferred") == [2] and _metrics(world, "Failures") == [0]
    world.out.clear()
    orchestrator({}, None, runtime)
    worker({"Records": drain(world.queue_url)}, Context(800), runtime)
    assert set(world.updates) == {(ACCOUNT, HERE, "a"), (ACCOUNT, HERE, "b")}


def test_the_runs_sagemaker_calls_share_one_bucket_per_kind(world: FleetWorld) -> None:
    names = [f"c{i}" for i in range(5)]
    _push(world, names, extra="hub: {sagemaker: {updates_per_second: 1, reads_per_second: 4, burst: 1, jitter: 0}}\n")
    runtime = world.runtime()
    waits: list[float] = []
    lock = threading.Lock()

    def sleep(seconds: float) -> None:
        with lock:
            waits.append(seconds)

    runtime.monotonic = lambda: 0.0  # time stands still: each wait is exactly the caller's place in line
    runtime.sleep = sleep
    orchestrator({}, None, runtime)
    assert worker({"Records": drain(world.queue_url)}, None, runtime) == {"batchItemFailures": []}
    assert len(world.updates) == 5
    # Five describes at 4/s and five updates at 1/s, from five threads at once: each bucket hands out
    # its slots one interval apart, whichever thread asks.
    assert sorted(waits) == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0, 2.0, 3.0, 4.0])


def test_a_split_targets_discovery_reads_only_its_own_shard(world: FleetWorld) -> None:
    for i in range(8):
        world.create(ACCOUNT, HERE, f"t{i}", tagged=True)
    world.settle([(ACCOUNT, HERE, f"t{i}") for i in range(8)])
    text = (
        "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
        f"targets: [{{account: '{ACCOUNT}', region: {HERE}, tag_selector: true, tag_shards: 3}}]\n"
    )
    config_store.write_text(config_store.Location("dynamodb", TABLE), text)
    runtime = world.runtime()
    tags_read: list[str] = []

    def sagemaker_for(session: boto3.Session, region: str) -> Any:
        client = world.sagemaker_for(session, region)
        client.meta.events.register(
            "provide-client-params.sagemaker.ListTags", lambda params, **_: tags_read.append(params["ResourceArn"])
        )
        return client

    runtime.sagemaker_for = sagemaker_for
    assert orchestrator({}, None, runtime)["queued"] == 3
    records = drain(world.queue_url)
    assert worker({"Records": records}, None, runtime) == {"batchItemFailures": []}
    # Every tagged cluster stopped once, and each one's tags were read by one part only.
    assert sorted(c for (_, _, c) in world.updates) == [f"t{i}" for i in range(8)]
    assert len(tags_read) == 8 and len(set(tags_read)) == 8


def test_a_runtime_reads_its_retry_settings_from_the_environment() -> None:
    env = {
        "HYPERPOD_SCHEDULER_TABLE": "t",
        "HYPERPOD_SCHEDULER_MAX_RECEIVES": "5",
        "HYPERPOD_SCHEDULER_RETRY_BACKOFF_SECONDS": "30",
    }
    runtime = Runtime.from_env(env)
    assert (runtime.max_receives, runtime.retry_backoff_s) == (5, 30.0)
    with pytest.raises(Exception, match="HYPERPOD_SCHEDULER_MAX_RECEIVES: 'x' is not a number"):
        Runtime.from_env({**env, "HYPERPOD_SCHEDULER_MAX_RECEIVES": "x"})
    assert timedelta(seconds=Runtime.from_env({"HYPERPOD_SCHEDULER_TABLE": "t"}).retry_backoff_s).seconds == 60
