"""Random records and history entries go into every backend and come back unchanged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.store import StateStore
from hyperpod_scheduler.store.records import (
    ClusterRecord,
    GroupOutcome,
    GroupSize,
    HistoryEntry,
    Hold,
    PendingAction,
    Snapshot,
)

# Fixed offsets only: datetimes in a zone with a repeated hour never compare equal across zones
# (PEP 495), which would make "unchanged" untestable rather than false.
ZONES = [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
keys = st.text(st.characters(exclude_categories=["Cs", "Cc"]), min_size=1, max_size=40)
instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.sampled_from(ZONES)
)
counts = st.integers(0, 6758)
seconds = st.floats(0, 1e7, allow_nan=False, allow_infinity=False)
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | seconds | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)

sizes = st.builds(GroupSize, count=counts, min_count=st.none() | counts)
snapshots = st.builds(
    Snapshot,
    taken_at=instants,
    sizes=st.dictionaries(text, sizes, max_size=4),
    transition_id=text,
    reason=text,
)
pendings = st.builds(
    PendingAction,
    transition_id=text,
    action=st.sampled_from(["stop", "start"]),
    phase=st.sampled_from(["intent", "sent", "settled"]),
    request_digest=text,
    created_at=instants,
    updated_at=instants,
    targets=st.dictionaries(text, counts, max_size=4),
    transition_at=st.none() | instants,
)
outcomes = st.builds(
    GroupOutcome,
    group=text,
    outcome=st.sampled_from(["restored", "partial", "failed", "stopped", "kept"]),
    current=counts,
    target=counts,
    detail=text,
)
holds = st.builds(Hold, state=st.sampled_from(["running", "stopped"]), until=st.none() | instants, by=text, reason=text)
records = st.builds(
    ClusterRecord,
    key=keys,
    snapshot=st.none() | snapshots,
    applied_state=st.sampled_from([None, "running", "stopped"]),
    applied_transition_at=st.none() | instants,
    pending=st.none() | pendings,
    last_outcomes=st.lists(outcomes, max_size=4),
    hold=st.none() | holds,
    start_durations_s=st.lists(seconds, max_size=60),
    updated_at=instants,
)
entries = st.builds(
    HistoryEntry,
    key=keys,
    at=instants,
    action=text,
    actor=text,
    outcome=text,
    duration_s=st.none() | seconds,
    detail=st.dictionaries(text, json_values, max_size=4),
)


@FUZZ
@given(record=records)
def test_any_record_round_trips(store: StateStore, record: ClusterRecord) -> None:
    current = store.get(record.key)
    stored = store.put(record, current.version if current else None)
    loaded = store.get(record.key)
    assert loaded == stored == record.evolve(version=stored.version)
    assert loaded is not None and loaded.model_dump_json() == stored.model_dump_json()


@FUZZ
@given(entry=entries)
def test_any_history_entry_round_trips(store: StateStore, entry: HistoryEntry) -> None:
    store.append_history(entry)
    newest = store.history(entry.key, limit=1000)
    assert entry in newest
    assert entry.model_dump_json() in {e.model_dump_json() for e in newest}
