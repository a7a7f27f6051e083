"""'A stop that sent nothing leaves the cluster running' (issue 27 item 2) must not swallow a real stop:
a cluster whose unprotected groups were walked to zero, with only its protected group still billing,
is stopped, and its Fleet row and page offer Start now (which restores the recorded sizes)."""

from __future__ import annotations

from hyperpod_scheduler.web import acting, truth


def test_a_stopped_cluster_with_only_its_protected_group_billing_still_offers_start() -> None:
    row = {
        "state": "stopped",
        "billing": [{"group": "plan", "count": 4}],  # a training-plan group: kept, billing
        "protected": [{"group": "plan", "kept": 4}],
        "recorded_sizes": {"plan": 4, "workers": 8},  # workers walked 8 -> 0 by the stop
        "hold": None,
    }
    assert "start" in acting.for_row(row)
    page = {
        "groups": [{"group": "plan", "current": 4, "target": 4}, {"group": "workers", "current": 0, "target": 0}],
        "protected_groups": [{"group": "plan", "keep_at": 4}],
        "recorded_sizes": {"plan": 4, "workers": 8},
        "actions": ["start", "hold"],
        "hold": None,
    }
    assert "start" in acting.for_cluster(page)
    assert not truth.stops_nothing(page["groups"], page["protected_groups"], page["recorded_sizes"])


def test_a_cluster_whose_stop_sent_nothing_is_still_offered_what_a_running_one_is() -> None:
    row = {
        "state": "stopped",
        "billing": [{"group": "plan", "count": 4}],
        "protected": [{"group": "plan", "kept": 4}],
        "recorded_sizes": {"plan": 4},
        "hold": None,
    }
    assert "start" not in acting.for_row(row) and "stop" in acting.for_row(row)


def test_the_schedules_page_does_not_call_a_walked_down_cluster_never_stopped() -> None:
    """The schedules page's 'never stopped' reads the same truth: a cluster a stop walked down (workers
    8 -> 0, its training-plan group still billing) is stopped by its schedule, not 'never stopped'."""
    from types import SimpleNamespace
    from typing import Any, cast

    from hyperpod_scheduler.cluster.tiers import Tier
    from hyperpod_scheduler.cluster.view import GroupView

    def group(name: str, n: int, plan: str | None) -> GroupView:
        return GroupView(name, n, n, None, "ml.p5.48xlarge", "InService", "Compute", plan, Tier.AMI, {})

    view = SimpleNamespace(
        groups=(group("plan", 4, "arn:aws:sagemaker:us-east-1:1:training-plan/p"), group("workers", 0, None))
    )
    g = cast(
        Any,
        SimpleNamespace(
            ref=SimpleNamespace(name="c1"),
            policy=SimpleNamespace(scarce_families=(), groups={}, release_scarce_capacity=False, keep_slurm_head=None),
        ),
    )
    assert truth.never_stopped(lambda _: view, [g]) == ["c1"]  # what DescribeCluster alone shows
    assert truth.never_stopped(lambda _: view, [g], lambda _: {"plan": 4, "workers": 8}) == []
