"""The record models on their own: validation, bounds, and helpers the engine relies on."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from hyperpod_scheduler.store.records import (
    MAX_START_DURATIONS,
    ClusterRecord,
    GroupSize,
    HistoryEntry,
    Hold,
    PendingAction,
    cluster_key,
    request_digest,
)

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValidationError, match="timezone"):
        ClusterRecord(key="a/b/c", updated_at=datetime(2026, 3, 2, 8, 0))


@pytest.mark.parametrize("count", [-1, 1.5, "many"])
def test_group_sizes_must_be_whole_and_not_negative(count: object) -> None:
    with pytest.raises(ValidationError, match="count"):
        GroupSize(count=count)  # type: ignore[arg-type]


def test_an_unknown_phase_is_refused() -> None:
    with pytest.raises(ValidationError, match="phase"):
        PendingAction(
            transition_id="t",
            action="stop",
            phase="maybe",  # type: ignore[arg-type]
            request_digest="d",
            created_at=T0,
            updated_at=T0,
        )


def test_evolve_validates_where_model_copy_would_not() -> None:
    record = ClusterRecord.new("a/b/c", T0)
    with pytest.raises(ValidationError, match="applied_state"):
        record.evolve(applied_state="paused")
    assert record.evolve(applied_state="stopped").applied_state == "stopped"
    assert record.applied_state is None  # frozen: the original is untouched


def test_start_durations_keep_only_the_most_recent() -> None:
    record = ClusterRecord.new("a/b/c", T0)
    for i in range(MAX_START_DURATIONS + 7):
        record = record.add_start_duration(float(i), T0)
    assert len(record.start_durations_s) == MAX_START_DURATIONS
    assert record.start_durations_s[0] == 7.0 and record.start_durations_s[-1] == MAX_START_DURATIONS + 6
    with pytest.raises(ValidationError):
        record.add_start_duration(float("nan"), T0)


def test_a_hold_is_active_until_its_end() -> None:
    hold = Hold(state="running", until=T0 + timedelta(hours=1), by="alice")
    assert hold.active(T0) and not hold.active(T0 + timedelta(hours=1))
    assert Hold(state="stopped", by="bob").active(T0 + timedelta(days=999))


def test_history_detail_is_stored_in_its_json_form() -> None:
    entry = HistoryEntry(
        key="a/b/c",
        at=T0,
        action="hold",
        actor="cli",
        outcome="ok",
        detail={"until": T0, "groups": ("workers", "login"), "sizes": GroupSize(count=3), "n": 1},
    )
    assert entry.detail == {
        "until": "2026-03-02T08:00:00+00:00",
        "groups": ["workers", "login"],
        "sizes": {
            "count": 3,
            "min_count": None,
            "instance_type": None,
            "instance_types": [],
            "image_id": None,
            "image_release": None,
            "health_checks": False,
        },
        "n": 1,
    }
    with pytest.raises(ValidationError, match="detail"):
        HistoryEntry(key="a/b/c", at=T0, action="x", actor="y", outcome="z", detail={"f": float("inf")})


def test_request_digest_ignores_key_order_but_not_values() -> None:
    a = {"ClusterName": "c", "InstanceGroups": [{"InstanceGroupName": "w", "InstanceCount": 0}]}
    b = {"InstanceGroups": [{"InstanceCount": 0, "InstanceGroupName": "w"}], "ClusterName": "c"}
    c = {"ClusterName": "c", "InstanceGroups": [{"InstanceGroupName": "w", "InstanceCount": 4}]}
    assert request_digest(a) == request_digest(b) != request_digest(c)
    assert request_digest(a).startswith("sha256:")


def test_cluster_keys_name_account_region_and_cluster() -> None:
    assert cluster_key("train", "us-west-2", "111122223333") == "111122223333/us-west-2/train"
    assert cluster_key("train", "us-west-2") == "default/us-west-2/train"


def test_json_round_trip_of_a_full_record(make_full_record: Callable[..., ClusterRecord]) -> None:
    full = make_full_record()
    assert ClusterRecord.model_validate_json(full.model_dump_json()) == full


def test_a_group_size_from_before_instance_types_still_loads_and_reads_its_one_type() -> None:
    old = GroupSize.model_validate({"count": 4, "instance_type": "ml.p5.48xlarge"})
    assert old.instance_types == [] and old.types == ("ml.p5.48xlarge",)
    flexible = GroupSize(count=10, instance_types=["ml.p5.48xlarge", "ml.g6.48xlarge"])
    assert flexible.types == ("ml.p5.48xlarge", "ml.g6.48xlarge")
