"""The demo: a short virtual run stops and restores all three example clusters, keeps the P5 group,
retries a start that fell short of capacity, and prices the nights with the FSx residual beside them."""

from __future__ import annotations

from hyperpod_scheduler.demo.run import run_demo, summary_rows


def test_four_virtual_days_of_the_demo() -> None:
    result = run_demo(days=4, step_minutes=10)
    rows = {r["cluster"]: r for r in summary_rows(result)}
    assert set(rows) == {"p5-training", "g5-dev", "trn1-research"}
    for r in rows.values():
        assert r["stops"] >= 2 and r["starts"] >= 1
        assert r["recorded_sizes"] and all(c > 0 for c in r["recorded_sizes"].values())
        assert 0 < r["instance_hours"] < r["always_on_hours"]
    messages = [e.message for e in result.events]
    assert any("keeping 'p5-workers' at 4" in m and "scarce" in m for m in messages)
    # Wednesday 07:00Z: the G5 pool is short, the all-or-nothing start rolls back and is retried
    g5 = rows["g5-dev"]
    assert g5["failures"] >= 1 and g5["starts"] > g5["restores"] >= 1
    assert any("sufficient capacity" in m and "retry 1" in m for m in messages)
    assert rows["trn1-research"]["failures"] == 0
    # Tuesday 22:00Z: a job checkpointing to local NVMe blocks the Trn1 stop; Wednesday's goes ahead
    blocked = [e for e in result.events if e.kind == "blocked"]
    assert [(e.cluster, e.at.isoformat()[:13]) for e in blocked] == [("trn1-research", "2026-12-01T22")]
    assert "/opt/dlami/nvme" in blocked[0].message and "instance-local" in blocked[0].message
    by_cluster = {c.name: c for c in result.report.clusters}
    assert by_cluster["trn1-research"].totals.fsx_residual > 0  # the FSx kept billing, quoted beside the saving
    assert by_cluster["g5-dev"].totals.avoided_cost > 0
    assert by_cluster["p5-training"].totals.protected_cost > 0
