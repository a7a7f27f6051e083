"""The demo: a short virtual run stops and restores the example clusters, keeps the P5 cluster (scarce
workers and the Slurm head they need), retries a start that fell short of capacity, and prices the
nights with FSx found through the emulator's own APIs quoted beside the saving."""

from __future__ import annotations

from hyperpod_scheduler.demo.run import run_demo, summary_rows


def test_four_virtual_days_of_the_demo() -> None:
    result = run_demo(days=4, step_minutes=10)
    rows = {r["cluster"]: r for r in summary_rows(result)}
    assert set(rows) == {"p5-training", "g5-dev", "trn1-research"}
    for name in ("g5-dev", "trn1-research"):
        r = rows[name]
        assert r["stops"] >= 2 and r["starts"] >= 1
        assert r["recorded_sizes"] and all(c > 0 for c in r["recorded_sizes"].values())
        assert 0 < r["instance_hours"] < r["always_on_hours"]
    # p5-training: its P5 workers are scarce, so they stay; its controller and login stay with them.
    p5 = rows["p5-training"]
    assert p5["stops"] == 0 and p5["instance_hours"] == p5["always_on_hours"]
    messages = [e.message for e in result.events if e.cluster == "p5-training"]
    assert any("keeping 'p5-workers' at 4" in m and "scarce" in m for m in messages)
    assert any(
        "keeping 'controller' at 1" in m and "stays up with the compute group 'p5-workers'" in m for m in messages
    )
    # Wednesday 07:00Z: the G5 pool is short, the all-or-nothing start rolls back and is retried
    g5 = rows["g5-dev"]
    assert g5["failures"] >= 1 and g5["starts"] > g5["restores"] >= 1
    assert any("sufficient capacity" in e.message and "retry 1" in e.message for e in result.events)
    assert rows["trn1-research"]["failures"] == 0
    # The fourth risk: g5-dev's ready-by start is issued early by its lead and is ready when the Berlin
    # day begins, every morning but Wednesday's shortage; the phases of each start are in its line.
    ready = g5["ready_by"]
    assert ready["mornings"] >= 3 and ready["on_time"] == ready["mornings"] - 1
    assert "p90 of" in ready["lead"] and "margin" in ready["lead"]
    early = [e for e in result.events if e.cluster == "g5-dev" and e.kind == "sent" and "min early" in e.message]
    assert len(early) == ready["mornings"]
    settled = [e for e in result.events if e.cluster == "g5-dev" and e.kind == "settled" and "ready_for" in e.detail]
    assert settled and all("g5-workers: launched +" in e.message for e in settled)
    assert sum(e.detail["ready_for"]["spare_s"] >= 0 for e in settled) == ready["on_time"]
    # trn1-research has a Slurm agent: its starts' last phase is the nodes joining Slurm, after lifecycle.
    trn1 = [e for e in result.events if e.cluster == "trn1-research" and e.kind == "settled" and "phases" in e.detail]
    assert trn1
    for e in trn1:
        workers = e.detail["phases"]["trn1-workers"]
        assert workers["slurm"] is not None and workers["slurm"] >= workers["lifecycle"]
    assert not any(e.detail["phases"]["g5-workers"]["slurm"] for e in settled)  # no agent: never claimed
    # Tuesday 22:00Z: a job checkpointing to local NVMe blocks the Trn1 stop; Wednesday's goes ahead
    blocked = [e for e in result.events if e.kind == "blocked"]
    assert [(e.cluster, e.at.isoformat()[:13]) for e in blocked] == [("trn1-research", "2026-12-01T22")]
    assert "/opt/dlami/nvme" in blocked[0].message and "instance-local" in blocked[0].message
    report = {c.name: c for c in result.report.clusters}
    # Every cluster whose schedule released anything shows a positive saving, FSx quoted beside it.
    for c in report.values():
        assert c.file_systems and c.periods.window.fsx_while_stopped > 0, c.name
        if c.released_anything:
            assert c.periods.window.saving > 0, c.name
    assert {n for n, c in report.items() if c.released_anything} == {"g5-dev", "trn1-research"}
    p5_cost = report["p5-training"].periods.per_night
    assert p5_cost.saving == 0 and p5_cost.kept_cost > 0  # kept: what a night costs, not saved
    assert {fs.found_by for c in report.values() for fs in c.file_systems} == {
        ("config", "InstanceStorageConfigs"),
        ("provisioning_parameters.json",),
        ("tag",),
    }
