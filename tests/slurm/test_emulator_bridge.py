"""The emulator with Slurm enabled: emulated nodes that reach Running start a real slurmd, scaled-in
ones stop theirs, so a whole stop/start cycle drains, loses and regains real Slurm nodes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hyperpod_scheduler.agent.settings import DRAIN_REASON, CheckpointSettings
from hyperpod_scheduler.agent.worker import SlurmSide
from hyperpod_scheduler.cluster.view import parse_cluster
from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.emulator.slurm_bridge import LocalSlurmd, SlurmBridge
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.guards.checkpoints import CheckpointGuard, LocalLink
from hyperpod_scheduler.slurm.commands import SubprocessSlurm
from hyperpod_scheduler.store.memory import MemoryStore
from tests.sessions import shared_session

from .real import ensure_slurm, exclusive, node_states, submit, wait_for

START = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
ROLE = "arn:aws:iam::123456789012:role/hyperpod-exec"
REF = ref_for("c1", "us-east-1")


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def start(self, name: str) -> None:
        self.calls.append(("start", name))

    def stop(self, name: str) -> None:
        self.calls.append(("stop", name))


def _event(instance: str, status: str, group: str = "gpu", cluster: str = "c1") -> dict[str, Any]:
    return {"type": "node", "cluster_name": cluster, "instance_group": group, "instance_id": instance, "status": status}


def test_the_bridge_gives_each_running_node_a_free_name_of_its_group_and_frees_it_when_gone() -> None:
    daemons = Recorder()
    bridge = SlurmBridge({"gpu": ["node1", "node2"]}, daemons, cluster="c1")
    for event in (
        _event("i-a", "Pending"),
        _event("i-a", "Running"),
        _event("i-a", "Running"),  # a repeat changes nothing
        _event("i-b", "Running"),
        _event("i-c", "Running"),  # the pool is exhausted: logged, not started
        _event("i-x", "Running", group="controller"),  # not a bridged group
        _event("i-y", "Running", cluster="other"),
        _event("i-a", "Gone"),
        _event("i-c", "Running"),  # takes the freed name
    ):
        bridge(event)
    assert daemons.calls == [("start", "node1"), ("start", "node2"), ("stop", "node1"), ("start", "node1")]


def _client(endpoint: str) -> Any:
    session = shared_session()
    return session.client("sagemaker", endpoint_url=endpoint)


def _request() -> dict[str, Any]:
    def grp(name: str, count: int, itype: str, node_type: str) -> dict[str, Any]:
        return {
            "InstanceGroupName": name,
            "InstanceType": itype,
            "InstanceCount": count,
            "ExecutionRole": ROLE,
            "ThreadsPerCore": 1,
            "SlurmConfig": {"NodeType": node_type, **({"PartitionNames": [name]} if node_type == "Compute" else {})},
        }

    return {
        "ClusterName": "c1",
        "Orchestrator": {"Slurm": {}},
        "InstanceGroups": [
            grp("controller", 1, "ml.m5.xlarge", "Controller"),
            grp("gpu", 2, "ml.g5.xlarge", "Compute"),
        ],
    }


def _settle(emu: Any, client: Any) -> dict[str, Any]:
    for _ in range(8 * 60):
        d = client.describe_cluster(ClusterName="c1")
        if d["ClusterStatus"] == "InService" and all(
            g["CurrentCount"] == g.get("TargetCount", g["CurrentCount"]) for g in d["InstanceGroups"]
        ):
            return dict(d)
        emu.advance(60)
    raise AssertionError("c1 did not settle")


@pytest.mark.real_slurm
def test_a_stop_start_cycle_on_the_emulator_drains_loses_and_regains_real_slurm_nodes(shared: Path) -> None:
    ensure_slurm()
    with exclusive(), running_emulator(virtual_start=START, seed=5) as emu:
        daemons = LocalSlurmd()
        for name in ("node1", "node2"):  # no instance behind them yet
            daemons.stop(name)
        wait_for(lambda: all(node_states()[n][0] == "down" for n in ("node1", "node2")), "node1-2 to be down")
        emu.backend.add_listener(SlurmBridge({"gpu": ["node1", "node2"]}, daemons, cluster="c1"))
        client = _client(emu.endpoint)
        client.create_cluster(**_request())
        _settle(emu, client)
        wait_for(lambda: all(node_states()[n][0] == "idle" for n in ("node1", "node2")), "node1-2 to join Slurm")

        ckpt = shared / "ckpt"
        submit(shared, "train", ckpt, f"ckpt:{ckpt}", partition="gpu", node="node1", periodic=False)
        settings = CheckpointSettings(policy="checkpoint-then-stop", grace_minutes=1, poll_seconds=0.2)
        guard = CheckpointGuard(settings, LocalLink(SlurmSide(SubprocessSlurm())))
        events = Collector()
        engine = Engine(
            MemoryStore(),
            lambda ref: client,
            emu.clock.now,
            events=events,
            sleep=emu.advance,
            guards_for=lambda ref: [guard],
        )

        stopped = engine.act(REF, "stop", transition_id="stop-1", wait=True, poll_seconds=60)
        assert stopped.kind == "settled", stopped
        assert list(ckpt.glob("step-*.pt")), "the job saved a checkpoint on the signal"
        wait_for(lambda: not SubprocessSlurm().jobs(), "the job to end with its instance")
        assert {n: s for n, s in node_states().items() if n != "node3"} == {
            "node1": ("drained", DRAIN_REASON),
            "node2": ("drained", DRAIN_REASON),
        }

        started = engine.act(REF, "start", transition_id="start-1", wait=True, poll_seconds=60)
        assert started.kind == "settled", started
        # The engine asked the guard after the start settled: drained nodes resumed, ready in Slurm.
        readiness = [e for e in events.events if e.message.startswith("checkpoints:") and e.kind == "note"]
        assert readiness, [e.message for e in events.events]
        view = parse_cluster(client.describe_cluster(ClusterName="c1"))
        answer = guard.started(REF.key, view, {"gpu": 2})  # asking again: nothing left to resume
        assert answer is not None and answer.ready is True, answer
        assert answer.resumed == []
        assert node_states()["node1"] == ("idle", "")
