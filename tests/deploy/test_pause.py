"""The pause switch (the hub's SchedulingActive, the fleet config's hub.paused): no transition anywhere,
nothing deleted, and the first tick after it catches up."""

from __future__ import annotations

import json

import pytest

from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.deploy.handlers import Runtime, orchestrator, worker
from hyperpod_scheduler.deploy.templates import load_template
from hyperpod_scheduler.errors import UsageError
from tests.deploy.conftest import ACCOUNTS, TABLE, FleetWorld, drain

ACCOUNT, HERE = ACCOUNTS[0], "us-east-1"
LOCATION = config_store.Location("dynamodb", TABLE)


def _config(extra: str = "") -> str:
    return (
        "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
        "defaults: {schedule: office}\n"
        f"targets: [{{account: '{ACCOUNT}', region: {HERE}, clusters: [a]}}]\n" + extra
    )


def _lines(world: FleetWorld, level: str) -> list[str]:
    return [x["message"] for x in world.log_lines() if x.get("level") == level]


def test_a_paused_fleet_config_stops_nothing_withdraws_queued_work_and_catches_up_after(world: FleetWorld) -> None:
    world.create(ACCOUNT, HERE, "a")
    world.settle([(ACCOUNT, HERE, "a")])
    config_store.write_text(LOCATION, _config())
    runtime = world.runtime()
    assert orchestrator({}, None, runtime)["queued"] == 1  # 06:00: queued before the pause
    config_store.write_text(LOCATION, _config("hub: {paused: true}\n"))
    world.advance_to(18, 30)  # the stop is due
    summary = orchestrator({}, None, runtime)
    assert (summary["queued"], summary["withdrawn"]) == (0, 1)
    assert summary["paused"] == "the fleet config's hub.paused is true"
    assert any(
        m.startswith("scheduling paused (the fleet config's hub.paused is true)") for m in _lines(world, "WARNING")
    )
    assert [x["Paused"] for x in world.log_lines() if "Paused" in x] == [0, 1]
    world.out.clear()
    assert worker({"Records": drain(world.queue_url)}, None, runtime) == {"batchItemFailures": []}
    assert not world.updates  # the message queued before the pause did nothing
    assert any("stale message, nothing done" in m for m in _lines(world, "WARNING"))
    config_store.write_text(LOCATION, _config("hub: {paused: false}\n"))
    world.advance(60)
    assert orchestrator({}, None, runtime)["queued"] == 1
    assert worker({"Records": drain(world.queue_url)}, None, runtime) == {"batchItemFailures": []}
    assert set(world.updates) == {(ACCOUNT, HERE, "a")}  # the stop, one tick after the pause ended


def test_the_hubs_scheduling_active_no_stops_the_orchestrator_and_every_worker(world: FleetWorld) -> None:
    world.create(ACCOUNT, HERE, "a")
    world.settle([(ACCOUNT, HERE, "a")])
    config_store.write_text(LOCATION, _config())
    world.advance_to(18, 30)
    runtime = world.runtime()
    orchestrator({}, None, runtime)  # queued while still active
    records = drain(world.queue_url)
    paused = Runtime(**{**runtime.__dict__, "scheduling_active": False})
    assert orchestrator({}, None, paused)["paused"] == "the hub's SchedulingActive is No"
    world.out.clear()
    assert worker({"Records": records}, None, paused) == {"batchItemFailures": []}
    assert not world.updates
    assert _lines(world, "WARNING") == ["scheduling paused (the hub's SchedulingActive is No): nothing done"]
    assert orchestrator({}, None, runtime)["queued"] == 1  # its claim was given back: active again, queued


def test_the_switch_is_a_template_parameter_that_reaches_both_functions() -> None:
    hub = load_template("hub")
    assert hub["Parameters"]["SchedulingActive"]["AllowedValues"] == ["Yes", "No"]
    assert hub["Parameters"]["SchedulingActive"]["Default"] == "Yes"
    for function in ("OrchestratorFunction", "WorkerFunction"):
        env = hub["Resources"][function]["Properties"]["Environment"]["Variables"]
        assert env["HYPERPOD_SCHEDULER_SCHEDULING_ACTIVE"] == {"Ref": "SchedulingActive"}
    env = {"HYPERPOD_SCHEDULER_TABLE": "t"}
    assert Runtime.from_env(env).scheduling_active
    assert not Runtime.from_env({**env, "HYPERPOD_SCHEDULER_SCHEDULING_ACTIVE": "No"}).scheduling_active
    with pytest.raises(UsageError, match="HYPERPOD_SCHEDULER_SCHEDULING_ACTIVE: 'maybe' is not Yes or No"):
        Runtime.from_env({**env, "HYPERPOD_SCHEDULER_SCHEDULING_ACTIVE": "maybe"})
    assert json.dumps(hub["Parameters"]["SchedulingActive"])  # plain YAML (no tags)


def test_a_pause_record_that_cannot_be_written_never_stops_the_tick(
    world: FleetWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hyperpod_scheduler.deploy import pause_record
    from hyperpod_scheduler.errors import AwsError

    def refused(*_: object) -> None:
        raise AwsError("pause record in hps-state: cannot write: AccessDeniedException: not allowed")

    monkeypatch.setattr(pause_record, "record", refused)
    world.create(ACCOUNT, HERE, "a")
    world.settle([(ACCOUNT, HERE, "a")])
    config_store.write_text(LOCATION, _config())
    assert orchestrator({}, None, world.runtime())["queued"] == 1
    assert any(m.startswith("the pause is not recorded for the faces: ") for m in _lines(world, "WARNING"))
