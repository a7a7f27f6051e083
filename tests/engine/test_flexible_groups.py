"""A flexible instance group (InstanceRequirements, no InstanceType) is protected like a plain group of
its scarcest type: a stop keeps it, end to end through the engine against the emulator (issue 26, case 4)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.conftest import ROLE, START, CountingClient, settle

REF = ref_for("flex", "us-east-1", account=DEFAULT_ACCOUNT)
FLEXIBLE = ["ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.g6.48xlarge"]


@pytest.fixture
def emu() -> Iterator[Emulator]:  # enough P5s for ten (the default pool holds eight)
    with running_emulator(
        virtual_start=START, seed=3, capacity={"instance_types": {"ml.p5.48xlarge": 16}}, in_process=True
    ) as e:
        yield e


def _group(name: str, count: int, node: str, **kind: Any) -> dict[str, Any]:
    return {
        "InstanceGroupName": name,
        "InstanceCount": count,
        "ExecutionRole": ROLE,
        "SlurmConfig": {"NodeType": node, **({"PartitionNames": [name]} if node == "Compute" else {})},
        **kind,
    }


def _request(gpu: dict[str, Any]) -> dict[str, Any]:
    return {
        "ClusterName": "flex",
        "Orchestrator": {"Slurm": {}},
        "InstanceGroups": [
            _group("controller", 1, "Controller", InstanceType="ml.m5.xlarge", ThreadsPerCore=1),
            _group("gpu", 10, "Compute", **gpu),
            _group("cpu", 2, "Compute", InstanceType="ml.c5.xlarge", ThreadsPerCore=1),
        ],
    }


@pytest.mark.parametrize(
    "gpu",
    [
        pytest.param({"InstanceRequirements": {"InstanceTypes": FLEXIBLE}}, id="flexible"),
        pytest.param({"InstanceType": "ml.p5.48xlarge", "ThreadsPerCore": 1}, id="plain-p5"),
    ],
)
def test_a_stop_keeps_a_flexible_group_like_a_plain_p5_group(
    emu: Emulator, counting: CountingClient, engine: tuple[Engine, Collector, MemoryStore], gpu: dict[str, Any]
) -> None:
    eng, events, store = engine
    counting.client.create_cluster(**_request(gpu))
    settle(emu, counting.client, "flex")

    result = eng.act(REF, "stop", transition_id="stop-1", wait=True, poll_seconds=60)

    assert result.kind == "settled", result
    after = {g["InstanceGroupName"]: g for g in settle(emu, counting.client, "flex")["InstanceGroups"]}
    assert after["gpu"]["TargetCount"] == 10  # kept, not zeroed 10 -> 0
    assert after["cpu"]["TargetCount"] == 0
    assert after["controller"]["TargetCount"] == 1  # the head stays with the kept compute
    assert "scarce capacity (ml.p5.48xlarge" in " ".join(e.message for e in events.events)
    record = store.get(REF.key)
    assert record is not None and record.snapshot is not None
    # The snapshot remembers every type the group may run (a flexible group has no InstanceType).
    expected = gpu["InstanceRequirements"]["InstanceTypes"] if "InstanceRequirements" in gpu else [gpu["InstanceType"]]
    assert record.snapshot.sizes["gpu"].types == tuple(expected)
