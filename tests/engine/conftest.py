"""Fixtures: an emulator on a virtual clock, a boto3 client that counts its calls, and a store; and
helpers that wait on the virtual clock for a cluster, or a fleet tick, to settle."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, tick
from hyperpod_scheduler.engine.runner import Engine, Result
from hyperpod_scheduler.store.memory import MemoryStore
from tests.sessions import shared_session

ROLE = "arn:aws:iam::123456789012:role/hyperpod-exec"
START = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)  # a Monday


def three_tier_request(name: str = "c1") -> dict[str, Any]:
    def grp(n: str, count: int, itype: str, node: str, lcc: dict[str, str] | None) -> dict[str, Any]:
        g: dict[str, Any] = {
            "InstanceGroupName": n,
            "InstanceType": itype,
            "InstanceCount": count,
            "ExecutionRole": ROLE,
            "ThreadsPerCore": 1,
            "SlurmConfig": {"NodeType": node, **({"PartitionNames": [n]} if node == "Compute" else {})},
            "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 200}}],
        }
        if lcc:
            g["LifeCycleConfig"] = lcc
        return g

    return {
        "ClusterName": name,
        "Orchestrator": {"Slurm": {}},
        "InstanceGroups": [
            grp("controller", 1, "ml.m5.xlarge", "Controller", None),
            grp(
                "dev",
                2,
                "ml.g5.xlarge",
                "Compute",
                {"SourceS3Uri": "s3://sagemaker-demo/lc/", "OnInitComplete": "ext.sh"},
            ),
            grp(
                "train",
                3,
                "ml.trn1.32xlarge",
                "Compute",
                {"SourceS3Uri": "s3://sagemaker-demo/lc/", "OnCreate": "on_create.sh"},
            ),
        ],
    }


class CountingClient:
    """A real boto3 client plus a tally of the operations it sent."""

    def __init__(self, endpoint: str) -> None:
        self.calls: Counter[str] = Counter()
        self.client = shared_session().client("sagemaker", endpoint_url=endpoint)
        self.client.meta.events.register("before-call.sagemaker.*", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1


@pytest.fixture(scope="module")
def module_emulator() -> Iterator[Emulator]:
    """One emulator per test module, answering this process's botocore in process (it still serves
    HTTP for child processes and urllib); ``emu`` renews it between tests."""
    with running_emulator(virtual_start=START, seed=3, in_process=True) as e:
        yield e


@pytest.fixture
def emu(module_emulator: Emulator) -> Iterator[Emulator]:
    """A fresh emulator for each test (no clusters, the clock at START, seed 3, no faults): the
    module's, renewed after the test. For tests about the scheduler; wire tests use ``served_emu``."""
    yield module_emulator
    module_emulator.renew()


@pytest.fixture
def served_emu() -> Iterator[Emulator]:
    """An emulator reached only over loopback HTTP, for the tests about the wire: the protocol, the
    fidelity and round-trip tests, the crash tests."""
    with running_emulator(virtual_start=START, seed=3) as e:
        yield e


@pytest.fixture
def counting(emu: Emulator) -> CountingClient:
    return CountingClient(emu.endpoint)


def settle(emu: Emulator, client: Any, name: str, limit_s: float = 8 * 3600) -> dict[str, Any]:
    """Advance the virtual clock until the cluster is InService with every group at its target."""
    waited = 0.0
    while waited <= limit_s:
        d = client.describe_cluster(ClusterName=name)
        if d["ClusterStatus"] in ("InService", "Failed") and all(
            g["CurrentCount"] == g.get("TargetCount", g["CurrentCount"]) for g in d["InstanceGroups"]
        ):
            return dict(d)
        emu.advance(60)
        waited += 60
    raise AssertionError(f"{name} did not settle")


def tick_until_settled(
    emu: Emulator, engine: Engine, fleet: Sequence[Governed], step_s: float, limit: int = 2000
) -> tuple[Result, int]:
    """Tick a one-cluster fleet every ``step_s`` virtual seconds until its update stops being in
    progress: the last result, and how many ticks that took."""
    for looks in range(1, limit + 1):
        emu.advance(step_s)
        [result] = tick(engine, fleet, emu.clock.now())
        if result.kind != "in-progress":
            return result, looks
    raise AssertionError(f"still in progress after {limit} ticks of {step_s:g} s")


@pytest.fixture
def engine(emu: Emulator, counting: CountingClient) -> tuple[Engine, Collector, MemoryStore]:
    store = MemoryStore()
    events = Collector()
    eng = Engine(store, lambda ref: counting.client, emu.clock.now, events=events, sleep=lambda s: emu.advance(s))
    return eng, events, store
