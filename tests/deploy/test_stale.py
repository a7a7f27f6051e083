"""Late and lost messages through the real handlers (moto, emulators): a message that comes back after a
newer job or a newer config does nothing and says so; a worker that dies, a message no worker ran and a
message of another format each give the part back within minutes, not half an hour."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.deploy.handlers import Runtime, orchestrator, worker
from hyperpod_scheduler.deploy.markers import LOST_AFTER_S, RUNNING_LAPSE_S, Markers
from tests.deploy.conftest import ACCOUNTS, TABLE, FleetWorld
from tests.store.dynamodb_mock import REGION

ACCOUNT, HERE = ACCOUNTS[0], "us-east-1"
LOCATION = config_store.Location("dynamodb", TABLE)


def _config(day: str) -> str:
    return (
        f"schedules: {{office: 'Mon-Fri {day} UTC'}}\n"
        "defaults: {schedule: office}\n"
        f"targets: [{{account: '{ACCOUNT}', region: {HERE}, clusters: [a]}}]\n"
    )


def _cluster(world: FleetWorld, day: str = "08:00-19:00") -> None:
    world.create(ACCOUNT, HERE, "a")
    world.settle([(ACCOUNT, HERE, "a")])
    config_store.write_text(LOCATION, _config(day))


def _receive(world: FleetWorld) -> list[dict[str, Any]]:
    """What the event source hands a worker (the message stays on the queue, invisible, until deleted)."""
    sqs = boto3.client("sqs", region_name=REGION)
    got = sqs.receive_message(
        QueueUrl=world.queue_url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["ApproximateReceiveCount"]
    ).get("Messages", [])
    return [
        {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
         "attributes": m.get("Attributes", {})}
        for m in got
    ]  # fmt: skip


class Killed(BaseException):
    """The Lambda runtime ending the invocation (a timeout, out of memory): nothing after it runs."""


def _dies(world: FleetWorld, runtime: Runtime, record: dict[str, Any]) -> None:
    """A worker takes the message and dies before its first SageMaker call."""

    def killed(session: Any, region: str) -> Any:
        raise Killed

    dying = Runtime(**{**runtime.__dict__, "sagemaker_for": killed})
    with pytest.raises(Killed):
        worker({"Records": [record]}, None, dying)


def _warnings(world: FleetWorld) -> list[str]:
    return [x["message"] for x in world.log_lines() if x.get("level") == "WARNING"]


def test_a_message_redelivered_after_a_newer_job_did_the_part_does_nothing(world: FleetWorld) -> None:
    _cluster(world)  # the day ends at 19:00
    runtime = world.runtime()
    world.advance_to(17, 55)
    assert orchestrator({}, None, runtime)["queued"] == 1
    (stale,) = _receive(world)
    _dies(world, runtime, stale)  # its message comes back when SQS's visibility timeout ends
    world.advance_to(18, 5)
    config_store.write_text(LOCATION, _config("08:00-22:00"))  # the operator extends the day
    world.advance_to(18, 12)
    assert orchestrator({}, None, runtime)["queued"] == 1
    assert worker({"Records": _receive(world)}, None, runtime) == {"batchItemFailures": []}
    world.advance_to(19, 25)
    assert orchestrator({}, None, runtime)["queued"] == 1  # this minute's job, not yet worked
    world.out.clear()
    late = {**stale, "attributes": {"ApproximateReceiveCount": "2"}}
    assert worker({"Records": [late]}, None, runtime) == {"batchItemFailures": []}  # deleted, not retried
    assert not world.updates  # the 17:55 job's day (ending at 19:00) stopped nothing
    (warning,) = _warnings(world)
    assert warning.startswith("stale message, nothing done: superseded by the job of 2026-11-30T19:25")
    assert "config version 2" in warning
    (line,) = [x for x in world.log_lines() if x.get("level") == "WARNING"]
    assert (line["scheduled_at"], line["config_version"]) == ("2026-11-30T17:55:00+00:00", 1)
    assert world.counts(ACCOUNT, HERE, "a")["train"] == 3


def test_a_message_after_its_part_was_done_and_given_back_does_nothing(world: FleetWorld) -> None:
    _cluster(world)
    runtime = world.runtime()
    world.advance_to(18, 55)
    orchestrator({}, None, runtime)
    (record,) = _receive(world)
    assert worker({"Records": [record]}, None, runtime) == {"batchItemFailures": []}
    world.advance_to(19, 5)
    world.out.clear()
    # The same message again (its deletion failed): the part was done and released; it is not redone.
    assert worker({"Records": [record]}, None, runtime) == {"batchItemFailures": []}
    assert not world.updates
    (warning,) = _warnings(world)
    assert "stale message, nothing done: its claim is gone" in warning


def test_a_queued_job_built_from_an_older_config_is_superseded_at_the_next_tick(world: FleetWorld) -> None:
    _cluster(world, "08:00-18:00")
    runtime = world.runtime()
    world.advance_to(17, 55)
    assert orchestrator({}, None, runtime)["queued"] == 1  # waits on the queue (the workers are behind)
    world.advance_to(18, 5)
    config_store.write_text(LOCATION, _config("08:00-22:00"))
    world.advance_to(18, 6)
    summary = orchestrator({}, None, runtime)
    assert (summary["queued"], summary["config_version"]) == (1, 2)
    assert any(x.get("message", "").startswith("queued job taken over: built from config version 1, now 2")
               for x in world.log_lines())  # fmt: skip
    records = _receive(world)
    old, new = sorted(records, key=lambda r: json.loads(r["body"])["config_version"])
    world.out.clear()
    assert worker({"Records": [old, new]}, None, runtime) == {"batchItemFailures": []}
    assert not world.updates  # the 18:00 stop of the old config never happened
    (warning,) = _warnings(world)
    assert "superseded by the job of 2026-11-30T18:06" in warning and "config version 2" in warning


def test_a_worker_that_dies_gives_its_part_back_within_minutes(world: FleetWorld) -> None:
    _cluster(world)
    runtime = world.runtime()
    world.advance_to(17, 0)
    orchestrator({}, None, runtime)
    (record,) = _receive(world)
    _dies(world, runtime, record)
    assert orchestrator({}, None, runtime)["queued"] == 0  # it may still be working
    world.advance(RUNNING_LAPSE_S + 60)  # the tick after its claim lapsed (before: 16 minutes on)
    assert orchestrator({}, None, runtime)["queued"] == 1


def test_a_message_no_worker_ran_gives_its_part_back_once_the_queue_shows_it_gone(world: FleetWorld) -> None:
    _cluster(world)
    runtime = world.runtime()
    world.advance_to(17, 0)
    orchestrator({}, None, runtime)
    world.advance(LOST_AFTER_S + 60)
    # Still waiting on the queue (a backlog): it keeps its part, so no copy piles up behind it.
    assert orchestrator({}, None, runtime)["in_flight"] == 1
    _receive(world)  # received, and the invocation never ran (throttled, or it failed at start)
    world.advance(60)
    assert orchestrator({}, None, runtime)["queued"] == 1  # before: 30 minutes on


def test_a_message_of_another_format_is_dropped_and_gives_its_part_back(world: FleetWorld) -> None:
    _cluster(world)
    runtime = world.runtime()
    orchestrator({}, None, runtime)
    (record,) = _receive(world)
    old = {**json.loads(record["body"]), "format": 1}
    world.out.clear()
    assert worker({"Records": [{**record, "body": json.dumps(old)}]}, None, runtime) == {"batchItemFailures": []}
    (line,) = world.log_lines()
    assert line["level"] == "ERROR" and "format 1 is not" in line["message"]
    assert f"its claim on {ACCOUNT}/{HERE}/0of1 released" in line["message"]
    assert orchestrator({}, None, runtime)["queued"] == 1  # at once, not when the claim lapses


def test_a_long_run_renews_its_claim_as_it_goes(world: FleetWorld) -> None:
    for name in ("b", "c", "d"):
        world.create(ACCOUNT, HERE, name)
    _cluster(world)
    config_store.write_text(LOCATION, _config("08:00-19:00").replace("clusters: [a]", "clusters: [a, b, c, d]"))
    runtime = world.runtime()
    ticks = iter(range(0, 10**6, 20))
    runtime.monotonic = lambda: float(next(ticks))  # each look at the run's clock: 20 s later
    renewals: list[str] = []
    real = runtime.client_for

    def client_for(service: str, region: str | None) -> Any:
        client = real(service, region)
        if service == "dynamodb":

            def seen(params: dict[str, Any], **_: Any) -> None:
                if params.get("ExpressionAttributeValues", {}).get(":s") == {"S": "running"}:
                    renewals.append(params["Key"]["pk"]["S"])

            client.meta.events.register("provide-client-params.dynamodb.UpdateItem", seen)
        return client

    runtime.client_for = client_for
    world.advance_to(19, 1)
    orchestrator({}, None, runtime)
    assert worker({"Records": _receive(world)}, None, runtime) == {"batchItemFailures": []}
    assert len(world.updates) == 4
    assert len(renewals) >= 3  # taken once, then renewed while the run went on
    markers = Markers(boto3.client("dynamodb", region_name=REGION), TABLE)
    assert markers.lookup(f"{ACCOUNT}/{HERE}/0of1") is None  # released at the end


def test_every_push_counts_the_configs_version_up_in_the_table_and_in_s3(aws: None) -> None:
    from hyperpod_scheduler.store.dynamodb import create_table

    create_table(boto3.client("dynamodb", region_name=REGION), TABLE)
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="cfg")
    for where in (LOCATION, config_store.Location("s3", "cfg", "fleet.yaml", region=REGION)):
        for _ in range(3):
            config_store.write_text(where, _config("08:00-19:00"))
        text, version = config_store.read_versioned(where)
        assert (text, version) == (_config("08:00-19:00"), 3), where
