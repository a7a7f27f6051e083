"""A fleet on the emulator's virtual clock, ticked in-process: the fault tests' (and the month bench's) rig."""

from __future__ import annotations

import random
import types
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import botocore.endpoint
from botocore.config import Config

from hyperpod_scheduler.aws.clients import sagemaker_client
from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import Engine, Result
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.memory import MemoryStore
from tests.reliability.harness import ACCOUNT, UpdateTally, counts

MONDAY_6AM = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
# The production client's retry count, in standard mode: adaptive mode adds client-side rate limiting
# whose waits are real time, which the virtual clock cannot skip.
TEST_RETRIES = Config(retries={"mode": "standard", "max_attempts": 8}, connect_timeout=5, read_timeout=30)


@contextmanager
def instant_retries() -> Iterator[None]:
    """botocore sleeps between retries in real time; on a virtual clock those sleeps only cost wall time."""
    module: Any = botocore.endpoint
    saved = module.time
    module.time = types.SimpleNamespace(sleep=lambda _s: None)
    try:
        yield
    finally:
        module.time = saved


class Interloper:
    """Someone else touching the cluster: just before some of the engine's UpdateCluster calls, an
    UpdateCluster that changes nothing puts the cluster into Updating, so the engine's call meets a real
    ConflictException from the model."""

    def __init__(self, emu: Emulator, rate: float, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.rate = rate
        self.done: Counter[str] = Counter()
        original = emu.backend.dispatch

        def dispatch(operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
            if operation == "UpdateCluster" and self.rng.random() < self.rate:
                name = str(params["ClusterName"])
                d = original("DescribeCluster", {"ClusterName": name}, **kw)
                if d["ClusterStatus"] == "InService":
                    g = d["InstanceGroups"][0]
                    same = {k: g[k] for k in ("InstanceGroupName", "InstanceType", "ExecutionRole", "SlurmConfig")}
                    original(
                        "UpdateCluster",
                        {"ClusterName": name, "InstanceGroups": [{**same, "InstanceCount": g["TargetCount"]}]},
                        **kw,
                    )
                    self.done[name] += 1
            return original(operation, params, **kw)

        emu.backend.dispatch = dispatch  # type: ignore[method-assign]


@dataclass
class FleetRun:
    emu: Emulator
    names: list[str]
    schedule: str
    enforced: bool = True
    store: MemoryStore = field(default_factory=MemoryStore)
    events: Collector = field(default_factory=Collector)
    tally: UpdateTally | None = None
    results: list[Result] = field(default_factory=list)

    def __post_init__(self) -> None:
        client = sagemaker_client(
            region="us-east-1",
            endpoint_url=self.emu.endpoint,
            config=TEST_RETRIES,
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        self.engine = Engine(
            self.store, lambda _ref: client, self.emu.clock.now, events=self.events, sleep=self.emu.advance
        )
        sched = resolve(self.schedule, {})
        self.governed = [Governed(ref_for(n, "us-east-1"), "fleet", sched, self.enforced) for n in self.names]

    def tick(self) -> list[Result]:
        results = tick(self.engine, self.governed, self.emu.clock.now())
        self.results.extend(results)
        return results

    def at(self, name: str, sizes: Mapping[str, int]) -> bool:
        status, groups = counts(self.emu, name)
        rec = self.store.get(ref_for(name, "us-east-1", account=ACCOUNT).key)
        settled = rec is not None and rec.pending is None
        return settled and status == "InService" and groups == {n: (c, c) for n, c in sizes.items()}

    def recorded(self, name: str) -> dict[str, int]:
        rec = self.store.get(ref_for(name, "us-east-1", account=ACCOUNT).key)
        return {n: s.count for n, s in rec.snapshot.sizes.items()} if rec and rec.snapshot else {}

    def failed(self, name: str) -> int:
        return sum(1 for e in self.events.events if e.cluster == name and e.kind == "failed")
