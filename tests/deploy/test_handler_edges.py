"""What the handlers do with a missing environment, a missing config and a malformed message."""

from __future__ import annotations

import json

import pytest

from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.deploy.handlers import Runtime, orchestrator, worker
from hyperpod_scheduler.errors import UsageError
from tests.deploy.conftest import TABLE, FleetWorld, drain


def test_the_environment_must_name_the_table() -> None:
    with pytest.raises(UsageError, match="HYPERPOD_SCHEDULER_TABLE: not set"):
        Runtime.from_env({})
    runtime = Runtime.from_env({"HYPERPOD_SCHEDULER_TABLE": "t"})
    assert str(runtime.config_location) == "dynamodb://t"
    s3 = Runtime.from_env({"HYPERPOD_SCHEDULER_TABLE": "t", "HYPERPOD_SCHEDULER_CONFIG": "s3://b/fleet.yaml"})
    assert str(s3.config_location) == "s3://b/fleet.yaml"


def test_the_orchestrator_needs_a_queue_and_a_pushed_config(world: FleetWorld) -> None:
    runtime = world.runtime()
    with pytest.raises(UsageError, match="nothing stored yet"):
        orchestrator({}, None, runtime)
    runtime.queue_url = ""
    with pytest.raises(UsageError, match="HYPERPOD_SCHEDULER_QUEUE_URL"):
        orchestrator({}, None, runtime)


def test_a_malformed_message_is_logged_and_dropped_not_retried(world: FleetWorld) -> None:
    runtime = world.runtime()
    answer = worker({"Records": [{"messageId": "m1", "body": "{not json"}]}, None, runtime)
    assert answer == {"batchItemFailures": []}
    (line,) = [json.loads(x) for x in world.out]
    assert line["level"] == "ERROR" and "not JSON" in line["message"] and line["message_id"] == "m1"


def test_a_cluster_that_fails_does_not_stop_the_others_in_its_target(world: FleetWorld) -> None:
    world.create("111111111111", "eu-west-1", "train")
    world.settle([("111111111111", "eu-west-1", "train")])
    config = (
        "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
        "targets:\n  - {account: '111111111111', region: eu-west-1, schedule: office, clusters: [ghost, train]}\n"
    )
    config_store.write_text(config_store.Location("dynamodb", TABLE), config)
    runtime = world.runtime()
    orchestrator({}, None, runtime)
    assert worker({"Records": drain(world.queue_url)}, None, runtime) == {"batchItemFailures": []}
    assert set(world.updates) == {("111111111111", "eu-west-1", "train")}
    lines = [json.loads(x) for x in world.out]
    assert [line["cluster"] for line in lines if line.get("level") == "ERROR"] == ["ghost"]
    (metrics,) = [line for line in lines if "Actions" in line]
    assert (metrics["Actions"], metrics["Failures"]) == (1, 1)
