"""Random requests and clock jumps never break the model's invariants."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from hyperpod_scheduler.emulator.errors import EmulatorError
from hyperpod_scheduler.emulator.model_state import CLUSTER_STATUSES, GROUP_STATUSES
from tests.emulator_model.helpers import backend, clock, cluster_request, group, resend

pytestmark = pytest.mark.long_run  # a Hypothesis state machine over the model

P5 = "ml.p5.48xlarge"
POOL = 6
NAMES = ("c1", "c2", "c3")
NODE_STATUSES = {"Pending", "Running", "ShuttingDown", "DeepHealthCheckInProgress", "Failure"}


class EmulatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.b = backend({"instance_types": {P5: POOL}, "failures": {"lifecycle_script_failure_rate": 0.1}}, seed=13)

    def _try(self, op: str, params: dict[str, Any]) -> None:
        try:
            self.b.dispatch(op, params)
        except EmulatorError as exc:
            assert exc.code in {"ConflictException", "ValidationException", "ResourceNotFound", "ResourceInUse"}

    @rule(
        name=st.sampled_from(NAMES),
        workers=st.integers(0, 8),
        continuous=st.booleans(),
        tier=st.sampled_from(["ami", "extension", "custom"]),
    )
    def create(self, name: str, workers: int, continuous: bool, tier: str) -> None:
        self._try(
            "CreateCluster", cluster_request(name, workers=workers, worker_type=P5, tier=tier, continuous=continuous)
        )

    @rule(name=st.sampled_from(NAMES), workers=st.integers(0, 8), minimum=st.integers(0, 3))
    def update(self, name: str, workers: int, minimum: int) -> None:
        try:
            d = self.b.dispatch("DescribeCluster", {"ClusterName": name})
        except EmulatorError:
            return
        sent = resend(d, {"gpu": workers})
        for g in sent:
            if g["InstanceGroupName"] == "gpu":
                g["MinInstanceCount"] = min(minimum, workers)
        self._try("UpdateCluster", {"ClusterName": name, "InstanceGroups": sent})

    @rule(name=st.sampled_from(NAMES), count=st.integers(0, 3))
    def add_group(self, name: str, count: int) -> None:
        self._try("UpdateCluster", {"ClusterName": name, "InstanceGroups": [group("extra", count, "Compute", P5)]})

    @rule(name=st.sampled_from(NAMES))
    def delete_group(self, name: str) -> None:
        self._try("UpdateCluster", {"ClusterName": name, "InstanceGroupsToDelete": ["extra"]})

    @rule(name=st.sampled_from(NAMES), n=st.integers(1, 4))
    def batch_add(self, name: str, n: int) -> None:
        self._try(
            "BatchAddClusterNodes",
            {"ClusterName": name, "NodesToAdd": [{"InstanceGroupName": "gpu", "IncrementTargetCountBy": n}]},
        )

    @rule(name=st.sampled_from(NAMES), k=st.integers(0, 3))
    def batch_delete(self, name: str, k: int) -> None:
        try:
            listed = self.b.dispatch("ListClusterNodes", {"ClusterName": name})["ClusterNodeSummaries"]
        except EmulatorError:
            return
        ids = [n["InstanceId"] for n in listed][: k + 1]
        self._try("BatchDeleteClusterNodes", {"ClusterName": name, "NodeIds": ids})

    @rule(name=st.sampled_from(NAMES))
    def delete(self, name: str) -> None:
        self._try("DeleteCluster", {"ClusterName": name})

    @rule(seconds=st.sampled_from([1, 30, 120, 600, 1800, 3 * 3600, 2 * 86400]))
    def wait(self, seconds: int) -> None:
        clock(self.b).advance(seconds)
        self.b.process_due()

    @invariant()
    def counts_capacity_and_statuses_are_valid(self) -> None:
        usage = self.b.usage()
        assert usage.get(P5, 0) <= POOL
        held = 0
        for summary in self.b.dispatch("ListClusters", {})["ClusterSummaries"]:
            d = self.b.dispatch("DescribeCluster", {"ClusterName": summary["ClusterName"]})
            assert d["ClusterStatus"] in CLUSTER_STATUSES
            for g in d["InstanceGroups"]:
                assert g["Status"] in GROUP_STATUSES
                assert 0 <= g["CurrentCount"] <= g["TargetCount"] or g["Status"] == "Deleting"
            listed = self.b.dispatch("ListClusterNodes", {"ClusterName": d["ClusterName"]})["ClusterNodeSummaries"]
            assert {n["InstanceStatus"]["Status"] for n in listed} <= NODE_STATUSES
            held += sum(1 for n in listed if n["InstanceType"] == P5)
        assert held == usage.get(P5, 0)  # capacity is exactly what the nodes hold


# EMU_SM_EXAMPLES=2000 for a long hunt; the default keeps the suite fast.
EmulatorMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("EMU_SM_EXAMPLES", "40")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestEmulatorMachine = EmulatorMachine.TestCase
