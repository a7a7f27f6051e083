"""What a stop would send, forecast by the planner and the guards themselves (``engine.stop_forecast``):
floors, ``keep``, the Slurm head kept with protected compute, an approval not given, a busy cluster.
Every face's "what a stop keeps" is this answer (issue 27: actions and the stop preview in one place)."""

from __future__ import annotations

from typing import Any

from hyperpod_scheduler.config.model import Policy
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.engine.ref import ClusterSettings
from hyperpod_scheduler.engine.stop_forecast import StopForecast, forecast
from hyperpod_scheduler.guards.approval import ApprovalGuard
from hyperpod_scheduler.guards.base import Guard, StopContext, Verdict
from hyperpod_scheduler.guards.capacity import CapacityGuard
from hyperpod_scheduler.store.records import Origin
from tests.engine.builders import T0, cluster, group


def _forecast(view: Any, policy: Policy, *, origin: Origin = "manual", extra: list[Any] | None = None) -> StopForecast:
    ref = ref_for("c1", "us-east-1").governed(ClusterSettings(policy=policy))
    guards: list[Any] = [CapacityGuard(policy), *(extra or [])]
    return forecast(view, None, ref, guards, now=T0, transition_at=T0, origin=origin)


def _after(f: StopForecast) -> dict[str, tuple[int, str]]:
    return {g.group: (g.after, g.kept_by) for g in f.groups}


def test_a_floor_keeps_its_group_at_the_floor_and_the_rest_goes_to_zero() -> None:
    view = cluster(group("gpu", 4), group("cpu", 2))
    f = _forecast(view, Policy(groups={"gpu": {"floor": 2}}))
    assert f.outcome == "sends"
    assert _after(f) == {"gpu": (2, "floor"), "cpu": (0, "")}
    assert [g.group for g in f.released] == ["cpu"] and f.kept[0].why == "policy floor 2"


def test_a_keep_on_every_group_sends_nothing_and_keeps_everything() -> None:
    view = cluster(group("gpu", 4), group("cpu", 2))
    f = _forecast(view, Policy(groups={"gpu": "keep", "cpu": "keep"}))
    assert f.outcome == "nothing" and f.keeps_everything
    assert _after(f) == {"gpu": (4, "keep"), "cpu": (2, "keep")}


def test_the_slurm_controller_stays_with_protected_compute() -> None:
    view = cluster(
        group("controller", 1, node_type="Controller", itype="ml.m5.xlarge"),
        group("p5", 4, itype="ml.p5.48xlarge"),
        group("cpu", 2),
    )
    f = _forecast(view, Policy())
    assert _after(f) == {"controller": (1, "slurm head"), "p5": (4, "scarce"), "cpu": (0, "")}
    assert "stays up with the compute group 'p5'" in f.kept[0].why


def test_a_scheduled_release_waits_for_its_approval_and_a_persons_stop_does_not() -> None:
    view = cluster(group("p5", 4, itype="ml.p5.48xlarge"), group("cpu", 2))
    policy = Policy(release_scarce_capacity=True, approve_release="scarce")
    approval = ApprovalGuard(policy, lambda key: [])
    scheduled = _forecast(view, policy, origin="schedule", extra=[approval])
    assert _after(scheduled) == {"p5": (4, "approval"), "cpu": (0, "")}
    manual = _forecast(view, policy, origin="manual", extra=[approval])
    assert _after(manual) == {"p5": (0, ""), "cpu": (0, "")}


def test_a_blocking_guard_or_a_busy_cluster_sends_nothing_and_says_why() -> None:
    class Blocks(Guard):
        name = "eks"

        def before_stop(self, ctx: StopContext) -> Verdict:
            return Verdict(self.name, "block", "no audit")

    view = cluster(group("gpu", 4))
    blocked = _forecast(view, Policy(), extra=[Blocks()])
    assert blocked.outcome == "blocked" and blocked.reason == "eks: no audit" and blocked.kept[0].after == 4
    busy = _forecast(cluster(group("gpu", 4, 2), status="Updating"), Policy())
    assert busy.outcome == "busy" and not busy.sends


def test_a_guard_with_side_effects_is_not_asked_by_a_forecast() -> None:
    class Audit(Guard):
        name = "checkpoints"
        side_effects = True

        def before_stop(self, ctx: StopContext) -> Verdict:
            raise AssertionError("a forecast must not signal or drain")

    f = _forecast(cluster(group("gpu", 4)), Policy(), extra=[Audit()])
    assert f.sends and f.audited_at_stop
