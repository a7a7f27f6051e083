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
