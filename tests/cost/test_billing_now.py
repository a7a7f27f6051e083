"""What bills now for a cluster in the middle of a start (issue 27): every node launched so far bills,
so `status` and the Fleet page price them; they said "-" (not known) for any starting cluster, and the
Fleet strip listed a starting P5 cluster as "not known" beside a total that left it out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hyperpod_scheduler.app.compose import Context, chain_clients
from hyperpod_scheduler.app.status import status_row
from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.cost.prices import bundled
from hyperpod_scheduler.store.memory import MemoryStore
from hyperpod_scheduler.store.records import (
    ClusterRecord,
    GroupPhases,
    GroupSize,
    HistoryEntry,
    PendingAction,
    Snapshot,
)

KEY = "123456789012/us-east-1/p5"
NOW = datetime(2026, 12, 1, 8, 10, tzinfo=UTC)
P5, M5 = "ml.p5.48xlarge", "ml.m5.xlarge"


def _row(kept_gpu: int, phases: dict[str, GroupPhases]) -> float | None:
    store = MemoryStore()
    sizes = {"gpu": GroupSize(count=4, instance_type=P5), "ctl": GroupSize(count=1, instance_type=M5)}
    stopped_at = NOW - timedelta(hours=12)
    outcomes = {
        "gpu": {"outcome": "kept" if kept_gpu else "stopped", "current": kept_gpu, "target": kept_gpu},
        "ctl": {"outcome": "stopped", "current": 0, "target": 0},
    }
    stop = HistoryEntry(
        key=KEY,
        at=stopped_at,
        action="stop",
        actor="t",
        outcome="ok",
        detail={"outcomes": outcomes, "sizes": {g: s.model_dump() for g, s in sizes.items()}},
    )
    pending = PendingAction(
        transition_id="morning",
        action="start",
        phase="sent",
        request_digest="d",
        created_at=NOW - timedelta(minutes=10),
        updated_at=NOW,
        targets={"gpu": 4, "ctl": 1},
        phases=phases,
    )
    record = ClusterRecord(
        key=KEY,
        snapshot=Snapshot(
            taken_at=stopped_at, sizes=sizes, transition_id="evening", kept={"gpu": kept_gpu} if kept_gpu else {}
        ),
        applied_state="stopped",
        pending=pending,
        updated_at=NOW,
    )
    store.put(record, None, [stop])
    ctx = Context(Config(), store, chain_clients(), lambda: NOW, notify=False)
    row = status_row(ctx, None, KEY)
    assert row.state == "starting"
    return row.usd_per_hour


def _phases(group: str, target: int, *, in_setup: int = 0, running: int = 0) -> GroupPhases:
    return GroupPhases(group=group, target=target, requested=NOW, in_setup=in_setup, running=running, seen_at=NOW)


def test_a_starting_cluster_bills_the_nodes_come_up_so_far() -> None:
    p5, m5 = bundled().instance(P5), bundled().instance(M5)
    assert p5 is not None and m5 is not None
    hourly = _row(0, {"gpu": _phases("gpu", 4, in_setup=2, running=1), "ctl": _phases("ctl", 1, running=1)})
    assert hourly == pytest.approx(3 * p5.usd + m5.usd)  # the fourth P5 has no instance yet


def test_a_group_kept_through_the_night_bills_while_the_rest_comes_back() -> None:
    p5 = bundled().instance(P5)
    assert p5 is not None
    assert _row(2, {}) == pytest.approx(2 * p5.usd)  # no look yet: the two kept P5 nodes still bill
