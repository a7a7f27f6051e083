"""Group outcomes in history lines: written as typed data, read back typed; the old strings still read."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_scheduler.store.outcomes import outcomes_detail, read_outcome, read_outcomes
from hyperpod_scheduler.store.records import GroupOutcome, HistoryEntry

KINDS = st.sampled_from(["restored", "partial", "failed", "stopped", "kept"])
COUNTS = st.integers(0, 6758)


@given(KINDS, COUNTS, COUNTS, st.text(max_size=30))
def test_what_is_written_reads_back_the_same_through_the_store_codec(
    kind: str, current: int, target: int, detail: str
) -> None:
    o = GroupOutcome(group="gpu", outcome=kind, current=current, target=target, detail=detail)  # type: ignore[arg-type]
    line = HistoryEntry.model_validate_json(
        HistoryEntry(
            key="default/us-east-1/c",
            at="2026-12-01T00:00:00Z",
            action="stop",
            actor="t",
            outcome="ok",  # type: ignore[arg-type]
            detail={"outcomes": outcomes_detail([o])},
        ).model_dump_json()
    )
    assert read_outcomes(line.detail) == {"gpu": o}


@given(KINDS, COUNTS, COUNTS)
def test_old_string_lines_still_read(kind: str, current: int, target: int) -> None:
    parsed = read_outcome("gpu", f"{kind} {current}/{target}")
    assert parsed == GroupOutcome(group="gpu", outcome=kind, current=current, target=target)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [
        "kept",  # no counts
        "sleeping 0/4",  # not an outcome
        "kept -1/4",
        "kept 4/4 and more",
        None,
        42,
        {"outcome": "kept", "current": 4},  # no target
        {"outcome": "kept", "current": True, "target": 1},  # a bool is not a count
        {"outcome": "kept", "current": -1, "target": 1},
        {"outcome": "napping", "current": 0, "target": 0},
        ["kept", 4, 4],
    ],
)
def test_garbage_is_left_out_never_guessed(value: Any) -> None:
    assert read_outcome("gpu", value) is None
    assert read_outcomes({"outcomes": {"gpu": value, "ok": "stopped 0/0"}}) == {
        "ok": GroupOutcome(group="ok", outcome="stopped", current=0, target=0)
    }


@pytest.mark.parametrize("detail", [{}, {"outcomes": None}, {"outcomes": "stopped 0/0"}, {"outcomes": [1, 2]}])
def test_a_line_without_an_outcomes_mapping_has_none(detail: dict[str, Any]) -> None:
    assert read_outcomes(detail) == {}
