"""Capacity policies: which groups a stop keeps, and why; then the stop and start over the emulator."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_scheduler.config.model import Policy, merge_policies
from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.guards.capacity import CapacityGuard, head_warning, is_scarce, protections
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.builders import cluster, group
from tests.engine.conftest import ROLE, CountingClient, settle

PLAN_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/reserved-p5-capacity-2026"


@pytest.mark.parametrize(
    ("itype", "scarce"),
    [
        ("ml.p5.48xlarge", True),
        ("ml.p5en.48xlarge", True),
        ("ml.p4d.24xlarge", True),
        ("ml.p4de.24xlarge", True),
        ("ml.p6e-gb200.36xlarge", True),
        ("ml.p6-b200.48xlarge", True),
        ("ml.trn2.48xlarge", True),
        ("ml.trn1.32xlarge", False),
        ("ml.g5.48xlarge", False),
        ("ml.c5.xlarge", False),
        (None, False),
    ],
)
def test_scarce_families(itype: str | None, scarce: bool) -> None:
    assert is_scarce(itype) is scarce


def _groups() -> Any:
    return cluster(
        group("controller", 1, node_type="Controller", itype="ml.m5.xlarge"),
        group("login", 1, node_type="Login", itype="ml.m5.xlarge"),
        group("p5", 4, itype="ml.p5.48xlarge"),
        group("cpu", 6, itype="ml.c5.xlarge"),
    ).groups


@pytest.mark.parametrize(
    ("policy", "kept"),
    [
        (Policy(), {"p5": 4}),  # the default protects scarce capacity
        (Policy(release_scarce_capacity=True), {}),
        (Policy(keep_slurm_head=True), {"p5": 4, "controller": 1, "login": 1}),
        (Policy(groups={"cpu": {"floor": 2}}), {"p5": 4, "cpu": 2}),
        (Policy(groups={"cpu": "keep", "p5": "zero"}), {"cpu": 6}),  # an explicit zero releases a scarce group
        (Policy(scarce_families=["c5"], release_scarce_capacity=False), {"p5": 4, "cpu": 6}),
    ],
)
def test_protections_by_policy(policy: Policy, kept: dict[str, int]) -> None:
    assert {p.group: p.keep_at for p in protections(_groups(), policy)} == kept


def test_training_plan_is_never_released_even_with_include_protected() -> None:
    g = group("reserved", 8, itype="ml.p5.48xlarge")
    g["TrainingPlanArn"] = PLAN_ARN
    view = cluster(group("controller", 1, node_type="Controller"), g)
    found = protections(view.groups, Policy(release_scarce_capacity=True))
    assert [(p.group, p.overridable) for p in found] == [("reserved", False)]
    assert "training plan" in found[0].reason


def test_nearest_policy_layer_wins_per_field() -> None:
    merged = merge_policies(Policy(keep_slurm_head=True), Policy(keep_slurm_head=False, release_scarce_capacity=True))
    assert merged.keep_slurm_head is True and merged.release_scarce_capacity is True


def test_plan_warns_when_the_controller_is_zeroed() -> None:
    assert "queue" in (head_warning(_groups(), Policy()) or "")
    assert head_warning(_groups(), Policy(keep_slurm_head=True)) is None


def _p5_request() -> dict[str, Any]:
    def grp(n: str, count: int, itype: str, node: str) -> dict[str, Any]:
        slurm = {"NodeType": node, **({"PartitionNames": [n]} if node == "Compute" else {})}
        return {
            "InstanceGroupName": n,
            "InstanceType": itype,
            "InstanceCount": count,
            "ExecutionRole": ROLE,
            "SlurmConfig": slurm,
        }

    return {
        "ClusterName": "p5c",
        "Orchestrator": {"Slurm": {}},
        "InstanceGroups": [
            grp("controller", 1, "ml.m5.xlarge", "Controller"),
            grp("p5", 2, "ml.p5.48xlarge", "Compute"),
            grp("cpu", 4, "ml.c5.xlarge", "Compute"),
        ],
    }


@pytest.mark.parametrize(
    ("policy", "include", "after_stop"),
    [
        (Policy(), False, {"controller": 0, "p5": 2, "cpu": 0}),
        (Policy(), True, {"controller": 0, "p5": 0, "cpu": 0}),
        (Policy(groups={"cpu": {"floor": 1}}), False, {"controller": 0, "p5": 2, "cpu": 1}),
    ],
)
def test_stop_keeps_protected_groups_and_start_restores_all(
    emu: Emulator, counting: CountingClient, policy: Policy, include: bool, after_stop: dict[str, int]
) -> None:
    client = counting.client
    client.create_cluster(**_p5_request())
    settle(emu, client, "p5c")
    events = Collector()
    store = MemoryStore()
    engine = Engine(
        store,
        lambda r: client,
        emu.clock.now,
        events=events,
        sleep=emu.advance,
        guards_for=lambda r: [CapacityGuard(policy, include)],
    )
    ref = ref_for("p5c", "us-east-1", account=DEFAULT_ACCOUNT)
    assert engine.act(ref, "stop", transition_id="s", wait=True, poll_seconds=60).kind == "settled"
    d = settle(emu, client, "p5c")
    assert {g["InstanceGroupName"]: g["CurrentCount"] for g in d["InstanceGroups"]} == after_stop
    record = store.get(ref.key)
    assert record is not None and record.snapshot is not None
    assert {n: s.count for n, s in record.snapshot.sizes.items()} == {"controller": 1, "p5": 2, "cpu": 4}
    kept = {o.group for o in record.last_outcomes if o.outcome == "kept"}
    assert kept == {n for n, c in after_stop.items() if c > 0}
    if not include and "p5" in kept:
        assert any("keeping 'p5' at 2" in e.message and "scarce" in e.message for e in events.events)
    assert engine.act(ref, "start", transition_id="t", wait=True, poll_seconds=60).kind == "settled"
    d = settle(emu, client, "p5c")
    assert {g["InstanceGroupName"]: g["CurrentCount"] for g in d["InstanceGroups"]} == {
        "controller": 1,
        "p5": 2,
        "cpu": 4,
    }
