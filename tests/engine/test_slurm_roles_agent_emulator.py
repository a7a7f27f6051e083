"""Slurm roles from the Slurm agent's view, end to end in process through the composed engine against
the emulator: a cluster with no SlurmConfig and no readable provisioning_parameters.json, whose agent on
the controller reports (in its verdicts on the checkpoint channel) which group is its own and which
groups have Slurm nodes. Once the agent has spoken, a stop that keeps the protected P5 workers keeps
the controller and zeroes the plain compute group, where without it every group of unknown role is
kept; and `plan` says where the controller's role came from (issue 26, "the Slurm agent's view")."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_scheduler.agent.channel import StoreChannel
from hyperpod_scheduler.agent.daemon import serve_once
from hyperpod_scheduler.agent.shape import host_of, parse_shape
from hyperpod_scheduler.agent.worker import SlurmSide
from hyperpod_scheduler.app.compose import Clients, Context, LocalAgent
from hyperpod_scheduler.cli.plan import _protection_lines, _protection_rows
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.guards.checkpoints import ChannelLink
from hyperpod_scheduler.slurm.model import SlurmJob, SlurmNode
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.conftest import START, settle
from tests.engine.legacy_slurm import BUCKET, legacy_group
from tests.sessions import shared_session

COMPUTE = ("cpu-group", "worker-group-1")


LEGACY = {  # no SlurmConfig; the lifecycle source holds no provisioning_parameters.json
    "ClusterName": "legacy",
    "InstanceGroups": [
        legacy_group("controller-machine", "ml.m5.12xlarge", 1),
        legacy_group("login-group", "ml.m5.4xlarge", 1),
        legacy_group("cpu-group", "ml.c5.xlarge", 2),
        legacy_group("worker-group-1", "ml.p5.48xlarge", 4),
    ],
}


@dataclass
class EmulatedSlurm:
    """Slurm as the cluster's nodes make it: every running node of a compute group is a Slurm node named
    after its address (HyperPod's ``ip-10-1-2-3``), in a partition named after its group. Login nodes
    and the controller run no slurmd. ``resource_config`` is what HyperPod writes on each node."""

    client: Any
    drained: dict[str, str] = field(default_factory=dict)
    # A node's address is fixed for its life: read once per instance. The agent's start waits up to its
    # ready timeout (360 looks at the nodes), and describing every node at every look was 3,400 calls.
    addresses: dict[str, str] = field(default_factory=dict)

    def _hosts(self) -> list[tuple[str, str]]:
        out = []
        for s in self.client.list_cluster_nodes(ClusterName="legacy")["ClusterNodeSummaries"]:
            if s["InstanceStatus"]["Status"] != "Running":
                continue
            node_id = s["InstanceId"]
            if node_id not in self.addresses:
                node = self.client.describe_cluster_node(ClusterName="legacy", NodeId=node_id)["NodeDetails"]
                self.addresses[node_id] = node["PrivatePrimaryIp"]
            out.append((s["InstanceGroupName"], self.addresses[node_id]))
        return out

    def resource_config(self) -> dict[str, Any]:
        groups: dict[str, list[dict[str, str]]] = {}
        for group, ip in self._hosts():
            groups.setdefault(group, []).append({"CustomerIpAddress": ip})
        arn = self.client.describe_cluster(ClusterName="legacy")["ClusterArn"]
        return {
            "ClusterConfig": {"ClusterArn": arn, "ClusterName": "legacy"},
            "InstanceGroups": [{"Name": g, "Instances": hosts} for g, hosts in groups.items()],
        }

    def controller_host(self) -> str:
        return next(host_of(ip) for group, ip in self._hosts() if group == "controller-machine")

    def nodes(self) -> list[SlurmNode]:
        return [
            SlurmNode(
                host_of(ip),
                "drained" if host_of(ip) in self.drained else "idle",
                "",
                self.drained.get(host_of(ip), ""),
                (group,),
            )
            for group, ip in self._hosts()
            if group in COMPUTE
        ]

    def jobs(self) -> list[SlurmJob]:
        return []

    def signal(self, job_id: str, signal: str, batch_only: bool) -> None:
        pass

    def requeue(self, job_id: str) -> None:
        pass

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        self.drained.update(dict.fromkeys(nodes, reason))

    def resume(self, nodes: Sequence[str]) -> None:
        for n in nodes:
            self.drained.pop(n, None)


@dataclass
class Rig:
    emu: Emulator
    sagemaker: Any
    s3: Any
    store: MemoryStore
    events: Collector
    tmp: Path
    slurm: EmulatedSlurm
    channel: StoreChannel
    answered: list[str] = field(default_factory=list)

    def side(self) -> SlurmSide:
        """The agent on the controller: its shape read from the node's resource_config.json."""
        return SlurmSide(
            self.slurm,  # type: ignore[arg-type]
            now=self.emu.clock.now,
            sleep=self.emu.advance,
            name="agent@controller",
            shape_of=lambda names, now: parse_shape(
                self.slurm.resource_config(), self.slurm.controller_host(), names, now
            ),
        )

    def link(self, ref: Any, settings: Any) -> ChannelLink:
        """The checkpoint channel; while the scheduler waits on it, the agent answers (in process)."""

        def agent_answers(_: float) -> None:
            self.answered.extend(v.phase for v in serve_once(self.channel, self.side()))

        return ChannelLink(self.channel, now=self.emu.clock.now, sleep=agent_answers, poll_seconds=5)

    def context(self, policy: dict[str, Any] | None = None) -> Context:
        checkpoints = {"policy": "force", "partitions": {g: g for g in COMPUTE}}
        document = {
            "defaults": {"policy": policy or {}},
            "schedules": {"office": {"windows": ["Mon-Fri 08:00-18:00 UTC"]}},
            "targets": [
                {
                    "region": "us-east-1",
                    "clusters": [{"name": "legacy", "schedule": "office", "checkpoints": checkpoints}],
                }
            ],
        }
        path = self.tmp / "hyperpod-scheduler.yaml"
        path.write_text(yaml.safe_dump(document), encoding="utf-8")
        clients = Clients(
            sagemaker=lambda ref: self.sagemaker, s3=lambda ref: self.s3, sns=lambda region: None, pricing=lambda: None
        )
        return Context(
            load_config(path),
            self.store,
            clients,
            self.emu.clock.now,
            events=self.events,
            sleep=self.emu.advance,
            notify=False,
            agent=LocalAgent(link_for=self.link, now=self.emu.clock.now),
        )

    def act(self, action: str, tid: str, policy: dict[str, Any] | None = None) -> dict[str, int]:
        ctx = self.context(policy)
        g = ctx.fleet().find("legacy")
        assert g is not None
        result = ctx.engine().act(g.ref, action, transition_id=tid, wait=True, poll_seconds=60)
        assert result.kind in ("settled", "noop"), result
        answer = settle(self.emu, self.sagemaker, "legacy")
        return {x["InstanceGroupName"]: x["TargetCount"] for x in answer["InstanceGroups"]}

    def notes(self) -> str:
        return "\n".join(e.message for e in self.events.events)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    with running_emulator(virtual_start=START, seed=5, in_process=True) as emu:
        session = shared_session()
        sagemaker = session.client("sagemaker", endpoint_url=emu.endpoint)
        s3 = session.client("s3", endpoint_url=emu.endpoint)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key="src/on_create.sh", Body=b"#!/bin/bash\n")
        sagemaker.create_cluster(**LEGACY)
        settle(emu, sagemaker, "legacy")
        channel = StoreChannel(MemoryStore())
        yield Rig(emu, sagemaker, s3, MemoryStore(), Collector(), tmp_path, EmulatedSlurm(sagemaker), channel)


def test_without_the_agents_view_every_group_of_unknown_role_is_kept_with_the_p5_workers(rig: Rig) -> None:
    # No agent has spoken yet (no verdict on the channel): the roles are unknown, so all are kept.
    after = rig.act("stop", "stop-1")
    assert after == {"controller-machine": 1, "login-group": 1, "cpu-group": 2, "worker-group-1": 4}
    assert "the Slurm agent has reported no view of the cluster" in rig.notes()


def test_once_the_agent_has_spoken_a_stop_keeps_the_controller_and_zeroes_plain_compute(rig: Rig) -> None:
    # An evening whose policy released everything: the whole cluster goes to zero, and the agent on
    # the controller answers the stop's checkpoint audit, its verdict carrying what it sees.
    released = rig.act("stop", "stop-1", policy={"release_scarce_capacity": True})
    assert set(released.values()) == {0}
    assert "done" in rig.answered
    rig.act("start", "start-1")  # the morning; the agent answers the start's readiness too
    (key,) = rig.channel.clusters()  # the cluster's store key, as its intents name it
    verdict = rig.channel.read_verdict(key)
    assert verdict is not None and verdict.shape is not None and verdict.shape.controller == "controller-machine"

    after = rig.act("stop", "stop-2")  # the default policy: the P5 workers are protected

    assert after["worker-group-1"] == 4  # scarce capacity kept
    assert after["controller-machine"] == 1  # the Slurm controller stays with it: its role from the agent
    assert after["cpu-group"] == 0  # compute by the agent's view: zeroed (it was kept while unknown)
    assert after["login-group"] == 1  # the agent cannot tell a login group: kept with the head
    assert "Slurm roles from the Slurm agent: 'controller-machine' Controller" in rig.notes()

    record = next(rig.store.get(k) for k in rig.store.list_keys() if k.endswith("/legacy"))
    assert record is not None and record.slurm_roles is not None
    assert record.slurm_roles.agent["controller-machine"] == "Controller"

    # `plan` reads the remembered roles and says where the controller's came from.
    ctx = rig.context()
    g = ctx.fleet().find("legacy")
    assert g is not None
    lines = _protection_lines(_protection_rows(ctx, g))
    (controller,) = [line for line in lines if "keeps controller-machine" in line]
    assert "its role from the Slurm agent" in controller
