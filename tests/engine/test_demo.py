"""The demo: a short virtual run stops and restores all three example clusters."""

from __future__ import annotations

from hyperpod_scheduler.demo.run import run_demo, summary_rows


def test_two_virtual_days_stop_and_restore_every_cluster() -> None:
    result = run_demo(days=2, step_minutes=15)
    rows = {r["cluster"]: r for r in summary_rows(result)}
    assert set(rows) == {"p5-training", "g5-dev", "trn1-research"}
    for r in rows.values():
        assert r["stops"] >= 2 and r["starts"] >= 1
        assert r["restores"] == r["starts"] and r["failures"] == 0
        assert r["recorded_sizes"] and all(c > 0 for c in r["recorded_sizes"].values())
        assert 0 < r["instance_hours"] < r["always_on_hours"]
