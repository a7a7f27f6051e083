"""Hypothesis: whatever happens between them, a start restores what the last real stop recorded."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from hyperpod_scheduler.engine import planner
from hyperpod_scheduler.store.records import ClusterRecord
from tests.engine.builders import T0, cluster, group

GROUPS = ("controller", "gpu", "cpu")


class StopStart(RuleBasedStateMachine):
    """A cluster scaled by the planner's decisions and by hand; the record is updated as the runner does."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes = {"controller": 1, "gpu": 4, "cpu": 2}
        self.record = ClusterRecord.new("k", T0)
        self.expected: dict[str, int] | None = None  # what a start must restore
        self.tick = 0

    def view(self) -> Any:
        return cluster(
            *(group(n, c, node_type="Controller" if n == "controller" else "Compute") for n, c in self.sizes.items())
        )

    @rule()
    def stop(self) -> None:
        self.tick += 1
        plan = planner.plan_stop(self.view(), self.record, T0 + timedelta(hours=self.tick), f"s{self.tick}")
        if isinstance(plan, planner.Send):
            assert plan.snapshot is not None
            was_stopped = self.record.applied_state == "stopped"
            old = self.record.snapshot
            for n, c in self.sizes.items():
                rec = plan.snapshot.sizes[n].count
                if c > 0:
                    assert rec == c
                elif was_stopped and old is not None:
                    assert rec == old.sizes[n].count  # never overwritten with 0 while stopped
            self.record = self.record.evolve(snapshot=plan.snapshot, applied_state="stopped")
            self.sizes = {n: c for n, (c, _) in plan.counts.items()}
            self.expected = {n: s.count for n, s in plan.snapshot.sizes.items()}
        else:
            assert isinstance(plan, planner.Noop) and all(c == 0 for c in self.sizes.values())
            self.record = self.record.evolve(applied_state="stopped")

    @rule()
    def start(self) -> None:
        plan = planner.plan_start(self.view(), self.record)
        if self.record.snapshot is None:
            assert isinstance(plan, planner.Noop)
            return
        if isinstance(plan, planner.Send):
            for n, (c, _) in plan.counts.items():
                assert c == self.record.snapshot.sizes[n].count
                self.sizes[n] = c
        self.record = self.record.evolve(applied_state="running")

    @rule(name=st.sampled_from(GROUPS), size=st.integers(0, 6))
    def resize_by_hand(self, name: str, size: int) -> None:
        self.sizes[name] = size

    @invariant()
    def recorded_sizes_never_all_zero_after_a_real_stop(self) -> None:
        snap = self.record.snapshot
        if snap is not None and self.expected is not None:
            assert {n: s.count for n, s in snap.sizes.items()} == self.expected


TestStopStart = StopStart.TestCase
TestStopStart.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
