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
        # The default protects scarce capacity, and the Slurm head stays with the compute nodes it serves.
        (Policy(), {"p5": 4, "controller": 1, "login": 1}),
        (Policy(release_scarce_capacity=True), {}),  # nothing kept: the head goes too
        (Policy(keep_slurm_head=False), {"p5": 4}),  # an explicit setting still zeroes the head
        (Policy(keep_slurm_head=True, release_scarce_capacity=True), {"controller": 1, "login": 1}),
        (Policy(groups={"cpu": {"floor": 2}}, release_scarce_capacity=True), {"cpu": 2, "controller": 1, "login": 1}),
        (Policy(groups={"cpu": "keep", "p5": "zero"}), {"cpu": 6, "controller": 1, "login": 1}),
        (Policy(groups={"controller": "zero"}), {"p5": 4, "login": 1}),  # zero on the head group itself
        (Policy(groups={"cpu": {"floor": 0}}, release_scarce_capacity=True), {}),  # a floor of 0 keeps nothing
        (
            Policy(scarce_families=["c5"], release_scarce_capacity=False),
            {"p5": 4, "cpu": 6, "controller": 1, "login": 1},
        ),
    ],
)
def test_protections_by_policy(policy: Policy, kept: dict[str, int]) -> None:
    assert {p.group: p.keep_at for p in protections(_groups(), policy)} == kept


def test_training_plan_is_never_released_even_with_include_protected() -> None:
    g = group("reserved", 8, itype="ml.p5.48xlarge")
    g["TrainingPlanArn"] = PLAN_ARN
    view = cluster(group("controller", 1, node_type="Controller"), g)
    found = protections(view.groups, Policy(release_scarce_capacity=True))
    assert [(p.group, p.overridable) for p in found] == [("reserved", False), ("controller", False)]
    assert "training plan" in found[0].reason


def test_the_head_kept_with_its_workers_says_why_and_is_as_releasable_as_they_are() -> None:
    found = {p.group: p for p in protections(_groups(), Policy())}
    assert "stays up with the compute group 'p5' kept overnight" in found["controller"].reason
    assert "keep_slurm_head: false" in found["controller"].reason and "Slurm login" in found["login"].reason
    assert found["controller"].overridable  # --include-protected releases the P5 group, and its head with it
    g = group("reserved", 8, itype="ml.p5.48xlarge")
    g["TrainingPlanArn"] = PLAN_ARN
    view = cluster(group("controller", 1, node_type="Controller"), g)
    head = {p.group: p for p in protections(view.groups, Policy())}["controller"]
    assert not head.overridable  # a training plan never goes, so neither does the controller it needs


def test_only_a_kept_compute_group_pulls_the_head_along() -> None:
    view = cluster(
        group("ctl", 1, node_type="Controller", itype="ml.m5.xlarge"),
        group("login", 2, node_type="Login", itype="ml.m5.xlarge"),
        group("gpu", 3, itype="ml.g5.xlarge"),
    )
    # A kept login group is not a reason to keep the controller; nothing else stays.
    assert {p.group: p.keep_at for p in protections(view.groups, Policy(groups={"login": "keep"}))} == {"login": 2}
    assert protections(view.groups, Policy()) == []  # nothing scarce: the whole cluster stops


def test_nearest_policy_layer_wins_per_field() -> None:
    merged = merge_policies(Policy(keep_slurm_head=True), Policy(keep_slurm_head=False, release_scarce_capacity=True))
    assert merged.keep_slurm_head is True and merged.release_scarce_capacity is True


def test_plan_warns_when_the_controller_is_zeroed() -> None:
    assert "queue" in (head_warning(_groups(), Policy(release_scarce_capacity=True)) or "")
    assert "queue" in (head_warning(_groups(), Policy(keep_slurm_head=False)) or "")
    assert head_warning(_groups(), Policy()) is None  # kept with the P5 workers
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
        (Policy(), False, {"controller": 1, "p5": 2, "cpu": 0}),
        (Policy(), True, {"controller": 0, "p5": 0, "cpu": 0}),
        (Policy(keep_slurm_head=False), False, {"controller": 0, "p5": 2, "cpu": 0}),
        (Policy(groups={"cpu": {"floor": 1}}), False, {"controller": 1, "p5": 2, "cpu": 1}),
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
