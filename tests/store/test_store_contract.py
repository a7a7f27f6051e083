"""The state-store contract: every backend (see conftest.BACKENDS) must pass all of it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError
from hyperpod_scheduler.store import ConflictError, StateStore, StoreError, update
from hyperpod_scheduler.store.records import ClusterRecord, GroupSize, HistoryEntry, Reach, Snapshot

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
KEY = "111122223333/us-west-2/train"


def rec(key: str = KEY, **changes: object) -> ClusterRecord:
    return ClusterRecord.new(key, T0).evolve(**changes)


def entry(key: str, at: datetime, action: str = "stop", **detail: object) -> HistoryEntry:
    return HistoryEntry(key=key, at=at, action=action, actor="tick", outcome="ok", detail=detail)


def workers_count(record: ClusterRecord | None) -> int:
    assert record is not None and record.snapshot is not None
    return record.snapshot.sizes["workers"].count


def increment(record: ClusterRecord | None) -> ClusterRecord:
    count = workers_count(record) if record is not None and record.snapshot is not None else 0
    snap = Snapshot(taken_at=T0, sizes={"workers": GroupSize(count=count + 1)}, transition_id="t")
    return (record or rec()).evolve(snapshot=snap)


# ---- compare-and-set ---------------------------------------------------------------------------


def test_a_missing_record_reads_as_none(store: StateStore) -> None:
    assert store.get(KEY) is None
    assert store.list_keys() == []


def test_create_if_absent_stores_version_1(store: StateStore) -> None:
    stored = store.put(rec(applied_state="running"), expected_version=None)
    assert stored.version == 1
    assert store.get(KEY) == stored
    assert store.list_keys() == [KEY]


def test_expected_version_0_also_means_absent(store: StateStore) -> None:
    assert store.put(rec(), expected_version=0).version == 1
    with pytest.raises(ConflictError):
        store.put(rec(), expected_version=0)


def test_creating_an_existing_record_is_a_conflict_and_changes_nothing(store: StateStore) -> None:
    first = store.put(rec(applied_state="running"), None)
    with pytest.raises(ConflictError) as err:
        store.put(rec(applied_state="stopped"), None)
    assert KEY in str(err.value) and "version 1" in str(err.value)
    assert err.value.actual == 1
    assert store.get(KEY) == first


def test_each_write_increments_the_version(store: StateStore) -> None:
    r = store.put(rec(), None)
    for expected in (2, 3, 4):
        r = store.put(r.evolve(applied_state="stopped" if expected % 2 else "running"), r.version)
        assert r.version == expected
        assert store.get(KEY) == r


def test_the_version_in_the_record_is_ignored(store: StateStore) -> None:
    assert store.put(rec().evolve(version=99), None).version == 1
    assert store.put(rec().evolve(version=99), 1).version == 2


def test_a_stale_write_is_rejected(store: StateStore) -> None:
    store.put(rec(), None)
    seen_by_a = store.get(KEY)
    seen_by_b = store.get(KEY)
    assert seen_by_a is not None and seen_by_b is not None
    won = store.put(seen_by_a.evolve(applied_state="stopped"), seen_by_a.version)
    with pytest.raises(ConflictError) as err:
        store.put(seen_by_b.evolve(applied_state="running"), seen_by_b.version)
    assert (err.value.expected, err.value.actual) == (1, 2)
    assert store.get(KEY) == won


def test_updating_a_record_that_does_not_exist_is_a_conflict(store: StateStore) -> None:
    with pytest.raises(ConflictError) as err:
        store.put(rec(), expected_version=3)
    assert err.value.actual is None
    assert store.get(KEY) is None


def test_a_conflict_is_a_one_line_project_error(store: StateStore) -> None:
    store.put(rec(), None)
    with pytest.raises(HyperpodSchedulerError) as err:
        store.put(rec(), None)
    assert "\n" not in str(err.value) and err.value.exit_code != 0


def test_keys_are_listed_sorted(store: StateStore) -> None:
    for key in ("b/r/z", "a/r/y", "c/r/x"):
        store.put(rec(key), None)
    assert store.list_keys() == ["a/r/y", "b/r/z", "c/r/x"]


@pytest.mark.parametrize("bad", ["", "a\nb", "x" * 1100])
def test_a_bad_key_is_a_usage_error_naming_it(store: StateStore, bad: str) -> None:
    with pytest.raises(UsageError, match="state store key"):
        store.get(bad)


def test_a_negative_expected_version_is_a_usage_error(store: StateStore) -> None:
    with pytest.raises(UsageError, match="expected_version"):
        store.put(rec(), expected_version=-1)


def test_a_closed_store_refuses_use(store: StateStore) -> None:
    store.close()
    with pytest.raises(StoreError, match="after close"):
        store.get(KEY)


# ---- update (read-modify-CAS-retry) ---------------------------------------------------------------


def test_update_creates_then_modifies(store: StateStore) -> None:
    assert workers_count(update(store, KEY, increment)) == 1
    assert workers_count(update(store, KEY, increment)) == 2
    stored = store.get(KEY)
    assert stored is not None and stored.version == 2


def test_update_that_declines_writes_nothing(store: StateStore) -> None:
    assert update(store, KEY, lambda r: None) is None
    assert store.get(KEY) is None
    store.put(rec(), None)
    assert update(store, KEY, lambda r: None) == store.get(KEY)
    assert store.get(KEY).version == 1  # type: ignore[union-attr]


def test_update_rereads_after_losing_a_race(store: StateStore) -> None:
    store.put(rec(), None)
    calls = 0

    def racing_increment(record: ClusterRecord | None) -> ClusterRecord:
        nonlocal calls
        calls += 1
        if calls == 1:  # someone else writes between our read and our write
            update(store, KEY, increment)
        return increment(record)

    result = update(store, KEY, racing_increment, sleep=lambda s: None)
    assert calls == 2
    assert workers_count(result) == 2  # both increments survive
    assert workers_count(store.get(KEY)) == 2


def test_update_gives_up_after_its_retries(store: StateStore) -> None:
    store.put(rec(), None)
    calls = 0

    def always_raced(record: ClusterRecord | None) -> ClusterRecord:
        nonlocal calls
        calls += 1
        update(store, KEY, increment)
        return increment(record)

    with pytest.raises(ConflictError):
        update(store, KEY, always_raced, retries=2, sleep=lambda s: None)
    assert calls == 3


def test_update_refuses_a_record_for_another_key(store: StateStore) -> None:
    with pytest.raises(UsageError, match="other/key"):
        update(store, KEY, lambda r: rec("other/key"))


def test_no_update_is_lost_between_threads(opener: Callable[[], StateStore]) -> None:
    threads, per_thread = 6, 20
    handles = [opener() for _ in range(threads)]
    errors: list[BaseException] = []

    def work(s: StateStore) -> None:
        try:
            for _ in range(per_thread):
                update(s, KEY, increment, retries=10_000)
        except BaseException as exc:  # surfaced below; a thread's exception is otherwise lost
            errors.append(exc)

    pool = [threading.Thread(target=work, args=(h,)) for h in handles]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert errors == []
    final = handles[0].get(KEY)
    assert workers_count(final) == threads * per_thread
    assert final is not None and final.version == threads * per_thread


# ---- history ----------------------------------------------------------------------------------------


def test_history_is_newest_first_per_key_and_limited(store: StateStore) -> None:
    for i in range(5):
        store.append_history(entry(KEY, T0 + timedelta(hours=i), n=i))
        store.append_history(entry("other/r/c", T0 + timedelta(hours=i), n=100 + i))
    got = store.history(KEY, limit=3)
    assert [e.detail["n"] for e in got] == [4, 3, 2]
    assert all(e.key == KEY for e in got)
    assert len(store.history(KEY)) == 5
    assert store.history(KEY, limit=0) == []
    assert store.history("nobody/r/c") == []


def test_history_orders_by_time_not_by_append(store: StateStore) -> None:
    store.append_history(entry(KEY, T0 + timedelta(hours=2), n=2))
    store.append_history(entry(KEY, T0, n=0))
    store.append_history(entry(KEY, T0 + timedelta(hours=1), n=1))
    assert [e.detail["n"] for e in store.history(KEY)] == [2, 1, 0]


def test_history_entries_at_the_same_instant_keep_append_order(store: StateStore) -> None:
    for i in range(4):
        store.append_history(entry(KEY, T0, n=i))
    assert [e.detail["n"] for e in store.history(KEY)] == [3, 2, 1, 0]
    assert [e.detail["n"] for e in store.history_all()] == [0, 1, 2, 3]


def test_a_put_can_carry_history_lines_with_it(store: StateStore) -> None:
    store.append_history(entry(KEY, T0, n=0))
    stored = store.put(rec(applied_state="stopped"), None, history=[entry(KEY, T0 + timedelta(hours=1), n=1)])
    stored = store.put(
        stored.evolve(applied_state="running"),
        stored.version,
        history=[entry(KEY, T0 + timedelta(hours=2), n=2), entry("other/r/c", T0 + timedelta(hours=2), n=3)],
    )
    assert store.get(KEY) == stored and stored.version == 2
    assert [e.detail["n"] for e in store.history(KEY)] == [2, 1, 0]
    assert [e.detail["n"] for e in store.history_all()] == [0, 1, 2, 3]


def test_a_put_that_loses_its_race_stores_none_of_its_history(store: StateStore) -> None:
    first = store.put(rec(), None)
    store.put(first.evolve(applied_state="stopped"), first.version)
    with pytest.raises(ConflictError) as err:
        store.put(first.evolve(applied_state="running"), first.version, history=[entry(KEY, T0, n=1)])
    assert (err.value.expected, err.value.actual) == (1, 2)
    with pytest.raises(ConflictError):
        store.put(rec(), None, history=[entry(KEY, T0, n=2)])
    assert store.history(KEY) == [] and store.history_all() == []
    stored = store.get(KEY)
    assert stored is not None and stored.applied_state == "stopped"


def test_history_default_limit_is_50(store: StateStore) -> None:
    for i in range(55):
        store.append_history(entry(KEY, T0 + timedelta(minutes=i), n=i))
    got = store.history(KEY)
    assert len(got) == 50 and got[0].detail["n"] == 54


def test_history_all_is_a_half_open_window_oldest_first(store: StateStore) -> None:
    for i in range(6):
        store.append_history(entry(f"k{i % 2}/r/c", T0 + timedelta(hours=i), n=i))
    window = store.history_all(since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=4))
    assert [e.detail["n"] for e in window] == [1, 2, 3]
    assert [e.detail["n"] for e in store.history_all(since=T0 + timedelta(hours=4))] == [4, 5]
    assert [e.detail["n"] for e in store.history_all(until=T0 + timedelta(hours=1))] == [0]
    assert len(store.history_all()) == 6


def test_history_windows_compare_instants_across_offsets(store: StateStore) -> None:
    berlin_winter = timezone(timedelta(hours=1))
    store.append_history(entry(KEY, datetime(2026, 3, 2, 9, 0, tzinfo=berlin_winter), n=1))  # 08:00Z
    assert len(store.history_all(since=T0, until=T0 + timedelta(seconds=1))) == 1
    assert store.history_all(since=T0 + timedelta(microseconds=1)) == []


def test_history_rejects_naive_bounds_and_negative_limits(store: StateStore) -> None:
    with pytest.raises(UsageError, match="since"):
        store.history_all(since=datetime(2026, 1, 1))
    with pytest.raises(UsageError, match="limit"):
        store.history(KEY, limit=-1)


def test_prune_history_drops_only_older_entries(store: StateStore) -> None:
    for i in range(4):
        store.append_history(entry(KEY, T0 + timedelta(days=i), n=i))
    assert store.prune_history(before=T0 + timedelta(days=2)) == 2
    assert [e.detail["n"] for e in store.history(KEY)] == [3, 2]


def test_history_entries_round_trip(store: StateStore) -> None:
    e = HistoryEntry(
        key=KEY,
        at=T0,
        action="start",
        actor="user:alice",
        outcome="partial",
        duration_s=612.25,
        detail={"groups": {"workers": [12, 16]}, "note": "capacity", "ok": False, "x": None},
    )
    store.append_history(e)
    assert store.history(KEY) == [e]
    assert store.history_all() == [e]


# ---- leases ------------------------------------------------------------------------------------------


def test_a_lease_is_exclusive_until_it_expires(store: StateStore) -> None:
    assert store.acquire_lease(KEY, "a", 60, T0)
    assert not store.acquire_lease(KEY, "b", 60, T0 + timedelta(seconds=59))
    # Expired at exactly now >= expiry: another owner takes it over.
    assert store.acquire_lease(KEY, "b", 60, T0 + timedelta(seconds=60))
    assert not store.renew_lease(KEY, "a", 60, T0 + timedelta(seconds=61))
    assert not store.acquire_lease(KEY, "a", 60, T0 + timedelta(seconds=61))


def test_the_holder_can_reacquire_and_renew(store: StateStore) -> None:
    assert store.acquire_lease(KEY, "a", 10, T0)
    assert store.acquire_lease(KEY, "a", 10, T0 + timedelta(seconds=5))  # extends to +15
    assert not store.acquire_lease(KEY, "b", 10, T0 + timedelta(seconds=14))
    assert store.renew_lease(KEY, "a", 10, T0 + timedelta(seconds=14))  # extends to +24
    assert not store.acquire_lease(KEY, "b", 10, T0 + timedelta(seconds=23))
    assert store.acquire_lease(KEY, "b", 10, T0 + timedelta(seconds=24))


def test_an_expired_lease_cannot_be_renewed(store: StateStore) -> None:
    assert store.acquire_lease(KEY, "a", 10, T0)
    assert not store.renew_lease(KEY, "a", 10, T0 + timedelta(seconds=10))
    assert not store.renew_lease("never/held/c", "a", 10, T0)


def test_only_the_owner_can_release(store: StateStore) -> None:
    assert store.acquire_lease(KEY, "a", 60, T0)
    assert not store.release_lease(KEY, "b")
    assert not store.acquire_lease(KEY, "c", 60, T0)
    assert store.release_lease(KEY, "a")
    assert not store.release_lease(KEY, "a")
    assert store.acquire_lease(KEY, "c", 60, T0)


def test_leases_are_per_key_and_leave_records_alone(store: StateStore) -> None:
    store.put(rec(), None)
    assert store.acquire_lease(KEY, "a", 60, T0)
    assert store.acquire_lease("other/r/c", "b", 60, T0)
    assert store.get(KEY).version == 1  # type: ignore[union-attr]
    assert store.list_keys() == [KEY]


@pytest.mark.parametrize(
    ("owner", "ttl", "now", "field"),
    [
        ("", 60, T0, "owner"),
        ("a", 0, T0, "ttl_s"),
        ("a", float("nan"), T0, "ttl_s"),
        ("a", 60, datetime(2026, 3, 2, 8, 0), "now"),
    ],
)
def test_bad_lease_arguments_are_usage_errors(
    store: StateStore, owner: str, ttl: float, now: datetime, field: str
) -> None:
    with pytest.raises(UsageError, match=field):
        store.acquire_lease(KEY, owner, ttl, now)


# ---- records ---------------------------------------------------------------------------------------


def test_a_record_with_every_field_round_trips(
    store: StateStore, make_full_record: Callable[..., ClusterRecord]
) -> None:
    full = make_full_record()
    stored = store.put(full, None)
    assert stored == full.evolve(version=1)
    loaded = store.get(full.key)
    assert loaded == stored
    assert loaded is not None and loaded.model_dump_json() == stored.model_dump_json()


def test_fields_unknown_to_this_release_survive_a_read_modify_write(store: StateStore) -> None:
    newer = ClusterRecord.model_validate(
        {"key": KEY, "updated_at": T0.isoformat(), "savings": {"usd": 12.5}, "future_flag": True}
    )
    store.put(newer, None)
    update(store, KEY, lambda r: r.evolve(applied_state="stopped") if r else None)
    loaded = store.get(KEY)
    assert loaded is not None and loaded.applied_state == "stopped"
    assert loaded.model_extra == {"savings": {"usd": 12.5}, "future_flag": True}


def test_stored_records_are_not_aliased(store: StateStore, make_full_record: Callable[..., ClusterRecord]) -> None:
    full = make_full_record()
    store.put(full, None)
    full.start_durations_s.append(1.0)  # mutating the caller's copy must not reach the store
    loaded = store.get(full.key)
    assert loaded is not None and len(loaded.start_durations_s) == 3


# ---- which account a profile reaches ---------------------------------------------------------------


def test_an_unlooked_at_cluster_has_no_account(store: StateStore) -> None:
    assert store.account_for(Reach("prod", "us-east-1", "train")) is None
    assert store.accounts_named("us-east-1", "train") == {}


def test_the_first_account_binding_wins_unless_replaced_on_purpose(store: StateStore) -> None:
    prod = Reach("prod", "us-east-1", "train")
    assert store.bind_account(prod, "111111111111") == "111111111111"
    assert store.bind_account(prod, "222222222222") == "111111111111"  # a second runner sees the first's
    assert store.account_for(prod) == "111111111111"
    assert store.bind_account(prod, "222222222222", replace=True) == "222222222222"
    assert store.account_for(prod) == "222222222222"


def test_bindings_are_per_profile_region_and_name(store: StateStore) -> None:
    store.bind_account(Reach("prod", "us-east-1", "train"), "111111111111")
    store.bind_account(Reach("", "us-east-1", "train"), "111111111111")  # the default credential chain
    store.bind_account(Reach("dev", "us-east-1", "train"), "222222222222")
    store.bind_account(Reach("dev", "eu-west-1", "train"), "222222222222")
    store.bind_account(Reach("dev", "us-east-1", "other"), "222222222222")
    assert store.accounts_named("us-east-1", "train") == {
        "prod": "111111111111",
        "": "111111111111",
        "dev": "222222222222",
    }
    assert store.account_for(Reach("", "us-east-1", "train")) == "111111111111"


@pytest.mark.parametrize("account", ["default", "12345", "1234567890123", ""])
def test_an_account_that_is_not_an_account_id_is_refused(store: StateStore, account: str) -> None:
    with pytest.raises(UsageError, match="12-digit"):
        store.bind_account(Reach("p", "us-east-1", "c"), account)
