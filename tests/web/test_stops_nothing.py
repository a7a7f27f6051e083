"""'A stop that sent nothing leaves the cluster running' (issue 27 item 2) must not swallow a real stop:
a cluster whose unprotected groups were walked to zero, with only its protected group still billing,
is stopped, and its Fleet row and page offer Start now (which restores the recorded sizes).

The one rule is ``app.actions.never_stopped`` on the planner's forecast (it replaced the pages' own
``truth.stops_nothing`` and ``acting.for_row``/``for_cluster``, which judged from the protections alone)."""

from __future__ import annotations

from hyperpod_scheduler.app.actions import actions, never_stopped
from hyperpod_scheduler.config.model import Policy
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.engine.ref import ClusterSettings
from hyperpod_scheduler.engine.stop_forecast import StopForecast, forecast
from hyperpod_scheduler.guards.capacity import CapacityGuard
from tests.engine.builders import T0, cluster, group

PLAN = {"TrainingPlanArn": "arn:aws:sagemaker:us-east-1:1:training-plan/p"}


def _stopped_with_its_plan_group_kept() -> StopForecast:
    # A training-plan group (kept, billing) and workers at zero.
    view = cluster({**group("plan", 4, itype="ml.p5.48xlarge"), **PLAN}, group("workers", 0))
    ref = ref_for("c1", "us-east-1").governed(ClusterSettings())
    return forecast(view, None, ref, [CapacityGuard(Policy())], now=T0)


def test_a_stopped_cluster_with_only_its_protected_group_billing_still_offers_start() -> None:
    f = _stopped_with_its_plan_group_kept()
    assert f.keeps_everything  # a stop now would send nothing...
    recorded = {"plan": 4, "workers": 8}  # ...but the last stop walked workers 8 -> 0: it is stopped
    assert not never_stopped(f, recorded)
    assert "start" in actions("stopped", True, False, f, recorded)


def test_a_cluster_whose_stop_sent_nothing_is_still_offered_what_a_running_one_is() -> None:
    f = _stopped_with_its_plan_group_kept()
    offered = actions("stopped", True, False, f, {"plan": 4})
    assert never_stopped(f, {"plan": 4}) and never_stopped(f, {})
    assert "start" not in offered and "stop" in offered
