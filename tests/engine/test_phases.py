"""The phases of a start, per group, as the emulator's nodes, operations and events show them; and an
update refused while deep health checks run, which waits and is sent again instead of failing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.engine import phases
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.notify.channels import Message, Notifier
from hyperpod_scheduler.store.memory import MemoryStore
from hyperpod_scheduler.store.outcomes import read_phases
from hyperpod_scheduler.store.records import GroupPhases
from tests.engine.conftest import START, settle
from tests.sessions import shared_session

CHECKS = ["InstanceStress", "InstanceConnectivity"]
FAST = {"provisioning": [300, 360], "ami_setup": [200, 240], "deep_health_check": [1800, 2000]}


def _cluster(continuous: bool, checks: bool, gpus: int = 4) -> dict[str, Any]:
    request = slurm_request("hc", {"gpu": ("ml.g5.12xlarge", gpus)}, continuous=continuous)
    if checks:
        request["InstanceGroups"][1]["OnStartDeepHealthChecks"] = CHECKS
    return request


def _client(endpoint: str) -> Any:
    session = shared_session()
    return session.client("sagemaker", endpoint_url=endpoint)


def _engine(emu: Any, client: Any) -> tuple[Engine, Collector, MemoryStore]:
    store, events = MemoryStore(), Collector()
    engine = Engine(store, lambda r: client, emu.clock.now, events=events, sleep=emu.advance)
    return engine, events, store


def _start_line(store: MemoryStore, key: str) -> dict[str, GroupPhases]:
    line = [h for h in store.history(key) if h.action == "start" and h.outcome == "ok"][-1]
    return read_phases(line.detail)


@pytest.mark.parametrize("continuous", [True, False])
def test_each_phase_of_a_start_is_recorded_in_order_in_its_history_line(continuous: bool) -> None:
    with running_emulator(virtual_start=START, seed=4, capacity={"timing": FAST}, in_process=True) as emu:
        client = _client(emu.endpoint)
        client.create_cluster(**_cluster(continuous, checks=True))
        settle(emu, client, "hc")
        engine, events, store = _engine(emu, client)
        ref = ref_for("hc", "us-east-1")
        assert engine.act(ref, "stop", transition_id="s", wait=True, poll_seconds=60).kind == "settled"
        sent_at = emu.clock.now()
        assert engine.act(ref, "start", transition_id="t", wait=True, poll_seconds=60).kind == "settled"
        key = engine.identify(ref)[0].key
        got = _start_line(store, key)
        assert set(got) == {"controller", "gpu"}  # every group the start raised
        assert not got["controller"].checks and got["controller"].health_checks is None
        gp = got["gpu"]
        assert gp.checks and gp.target == 4 and gp.running == 4
        assert gp.source == ("events" if continuous else "nodes")
        assert gp.launched and gp.lifecycle and gp.health_checks
        assert sent_at <= gp.requested <= gp.launched < gp.lifecycle < gp.health_checks
        # The emulator's deep health checks take 30 to 33 minutes here: the phase says so.
        checking = (gp.health_checks - gp.lifecycle).total_seconds()
        assert 1700 <= checking <= 2000 + (0 if continuous else 120)
        assert gp.slurm is None  # no Slurm agent here: never claimed
        progress = [e.message for e in events.events if e.kind == "progress"]
        assert any("health checks running" in m for m in progress)
        assert any("4 of 4 g5 up" in m or "0 of 4 g5 up" in m for m in progress)
        notes = " ".join(e.message for e in events.events if e.kind == "note")
        assert ("no cluster events outside Continuous mode" in notes) is (not continuous)
        settled = [e for e in events.events if e.kind == "settled" and e.message.startswith("start")][-1]
        assert "health checks +" in settled.message and "phases" in settled.detail


def test_a_group_without_health_checks_passes_lifecycle_when_it_runs() -> None:
    with running_emulator(virtual_start=START, seed=5, capacity={"timing": FAST}, in_process=True) as emu:
        client = _client(emu.endpoint)
        client.create_cluster(**_cluster(True, checks=False))
        settle(emu, client, "hc")
        engine, _, store = _engine(emu, client)
        ref = ref_for("hc", "us-east-1")
        engine.act(ref, "stop", transition_id="s", wait=True, poll_seconds=60)
        engine.act(ref, "start", transition_id="t", wait=True, poll_seconds=60)
        gp = _start_line(store, engine.identify(ref)[0].key)["gpu"]
        assert not gp.checks and gp.health_checks is None and gp.lifecycle is not None
        assert gp.ready_at() == gp.lifecycle
        # Learned per group: request-to-ready of this group, kept for its ready-by lead.
        record = store.get(engine.identify(ref)[0].key)
        assert record is not None and record.group_phase_s["gpu"] == [gp.durations_s()]
        assert sum(gp.durations_s().values()) == (gp.lifecycle - gp.requested).total_seconds()


def test_waiting_for_capacity_is_shown_while_a_continuous_group_is_short() -> None:
    capacity = {"timing": FAST, "instance_types": {"ml.g5.12xlarge": 4}}
    with running_emulator(virtual_start=START, seed=6, capacity=capacity, in_process=True) as emu:
        client = _client(emu.endpoint)
        client.create_cluster(**_cluster(True, checks=False))
        settle(emu, client, "hc")
        engine, events, _ = _engine(emu, client)
        ref = ref_for("hc", "us-east-1")
        engine.act(ref, "stop", transition_id="s", wait=True, poll_seconds=60)
        emu.advance(600)
        # Someone else takes two of the four while the cluster is stopped.
        client.create_cluster(**slurm_request("thief", {"gpu": ("ml.g5.12xlarge", 2)}, continuous=True))
        settle(emu, client, "thief")
        engine.act(ref, "start", transition_id="t")
        emu.advance(1200)
        result = engine.follow(ref, wait=False)
        assert result.kind == "in-progress"
        last = [e.message for e in events.events if e.kind == "progress"][-1]
        assert "2 of 4 g5 up; 2 not launched yet" in last


def test_the_shortfall_notification_says_what_is_up_and_what_waits_for_capacity() -> None:
    capacity = {"timing": FAST, "instance_types": {"ml.g5.12xlarge": 4}}
    with running_emulator(virtual_start=START, seed=6, capacity=capacity, in_process=True) as emu:
        client = _client(emu.endpoint)
        client.create_cluster(**_cluster(True, checks=False))
        settle(emu, client, "hc")
        sent: list[Message] = []

        class Box:
            name = "box"

            def send(self, message: Message) -> None:
                sent.append(message)

        engine = Engine(
            MemoryStore(),
            lambda r: client,
            emu.clock.now,
            events=Notifier([Box()]),
            sleep=emu.advance,
            settle_timeout=timedelta(minutes=40),
        )
        ref = ref_for("hc", "us-east-1")
        engine.act(ref, "stop", transition_id="s", wait=True, poll_seconds=60)
        client.create_cluster(**slurm_request("thief", {"gpu": ("ml.g5.12xlarge", 2)}, continuous=True))
        settle(emu, client, "thief")
        assert engine.act(ref, "start", transition_id="t", wait=True, poll_seconds=120).kind == "failed"
        text = sent[-1].text
        assert "start shortfall" in sent[-1].subject
        assert "2 of 4 g5 up; 2 not launched yet" in text and "1 of 1 m5 up" in text


def test_without_list_cluster_nodes_phases_come_from_describe_cluster_and_say_so() -> None:
    with running_emulator(virtual_start=START, seed=7, capacity={"timing": FAST}, in_process=True) as emu:
        client = _client(emu.endpoint)
        client.create_cluster(**_cluster(True, checks=True))
        settle(emu, client, "hc")

        def denied(**_: Any) -> Any:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "ListClusterNodes")

        client.list_cluster_nodes = denied
        engine, events, store = _engine(emu, client)
        ref = ref_for("hc", "us-east-1")
        engine.act(ref, "stop", transition_id="s", wait=True, poll_seconds=60)
        assert engine.act(ref, "start", transition_id="t", wait=True, poll_seconds=60).kind == "settled"
        gp = _start_line(store, engine.identify(ref)[0].key)["gpu"]
        assert gp.source == "describe" and gp.health_checks is not None
        assert any("ListClusterNodes unavailable (AccessDeniedException)" in e.message for e in events.events)


def test_an_update_refused_while_health_checks_run_waits_and_is_sent_again() -> None:
    with running_emulator(virtual_start=START, seed=8, capacity={"timing": FAST}, in_process=True) as emu:
        client = _client(emu.endpoint)
        client.create_cluster(**_cluster(True, checks=True))
        settle(emu, client, "hc")
        engine, events, store = _engine(emu, client)
        ref = ref_for("hc", "us-east-1")
        # Someone adds a node by hand; its deep health checks are running at the evening stop.
        client.batch_add_cluster_nodes(
            ClusterName="hc", NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}]
        )
        emu.advance(700)
        assert any(
            n["InstanceStatus"]["Status"] == "DeepHealthCheckInProgress"
            for n in client.list_cluster_nodes(ClusterName="hc")["ClusterNodeSummaries"]
        )
        first = engine.act(ref, "stop", transition_id="evening")
        assert first.kind == "waiting" and "deep health checks are in progress" in first.message
        key = engine.identify(ref)[0].key
        record = store.get(key)
        assert record is not None and record.pending is None and record.checks_wait is not None
        assert [h.outcome for h in store.history(key) if h.action == "stop"] == ["waiting"]
        # The wait is not a failure: nothing notifiable was emitted.
        assert not [e for e in events.events if e.kind in ("failed", "error", "refused")]
        # --wait looks again every poll and sends once the checks are over.
        done = engine.act(ref, "stop", transition_id="evening", wait=True, poll_seconds=120)
        assert done.kind == "settled"
        record = store.get(key)
        assert record is not None and record.checks_wait is None
        outcomes = [h.outcome for h in sorted(store.history(key), key=lambda h: h.at) if h.action == "stop"]
        assert outcomes == ["waiting", "ok"]
        assert any("after waiting" in e.message and "deep health checks" in e.message for e in events.events)


def test_health_checks_past_the_settle_timeout_make_the_update_a_failure() -> None:
    with running_emulator(virtual_start=START, seed=9, capacity={"timing": FAST}, in_process=True) as emu:
        client = _client(emu.endpoint)
        client.create_cluster(**_cluster(True, checks=True))
        settle(emu, client, "hc")
        store, events = MemoryStore(), Collector()
        engine = Engine(
            store,
            lambda r: client,
            emu.clock.now,
            events=events,
            sleep=emu.advance,
            settle_timeout=timedelta(minutes=10),
        )
        ref = ref_for("hc", "us-east-1")
        client.batch_add_cluster_nodes(
            ClusterName="hc", NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}]
        )
        emu.advance(700)
        assert engine.act(ref, "stop", transition_id="evening").kind == "waiting"
        emu.advance(660)
        late = engine.act(ref, "stop", transition_id="evening")
        assert late.kind == "failed" and "still refused after 11m00s" in late.message
        key = engine.identify(ref)[0].key
        assert [h.outcome for h in sorted(store.history(key), key=lambda h: h.at) if h.action == "stop"] == [
            "waiting",
            "failed",
        ]
        record = store.get(key)
        assert record is not None and record.checks_wait is None


T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def _at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_a_phase_time_is_the_last_needed_nodes_and_never_moves() -> None:
    start = phases.begin({"gpu": 2, "cpu": 0}, {"gpu": 0}, {"gpu": True}, _at(0))
    assert set(start) == {"gpu"}
    nodes = [
        phases.NodeSeen("gpu", "i-1", "DeepHealthCheckInProgress", _at(5)),
        phases.NodeSeen("gpu", "i-2", "Pending", _at(7)),
    ]
    events = [phases.NodeEvent("i-1", _at(12), "checks")]
    first = phases.advance(start, phases.Look(_at(15), {"gpu": 0}, nodes, events))
    assert first["gpu"].launched == _at(7) and first["gpu"].lifecycle is None
    assert (first["gpu"].in_setup, first["gpu"].in_checks, first["gpu"].waiting) == (1, 1, 0)
    nodes[1] = phases.NodeSeen("gpu", "i-2", "DeepHealthCheckInProgress", _at(7))
    events.append(phases.NodeEvent("i-2", _at(14), "checks"))
    second = phases.advance(first, phases.Look(_at(20), {"gpu": 0}, nodes, events))
    assert second["gpu"].lifecycle == _at(14)
    # Without a dated event for every node the look's own time stands in (and a later event never
    # moves a phase already passed).
    up = [phases.NodeSeen("gpu", i, "Running", _at(5)) for i in ("i-1", "i-2")]
    third = phases.advance(second, phases.Look(_at(60), {"gpu": 2}, up, [phases.NodeEvent("i-1", _at(50), "running")]))
    assert third["gpu"].health_checks == _at(60) and third["gpu"].lifecycle == _at(14)
    assert third["gpu"].durations_s() == {"launched": 420.0, "lifecycle": 420.0, "health_checks": 2760.0}
    text = phases.progress(third, _at(60), {"gpu": "ml.p5.48xlarge"})
    assert text == "09:00: 2 of 2 p5 up"
