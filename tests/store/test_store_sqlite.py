"""What only the SQLite store promises: processes, the file on disk, and damaged contents."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store import (
    ENV_VAR,
    CorruptRecordError,
    MemoryStore,
    SqliteStore,
    StoreError,
    default_path,
    open_store,
    update,
)
from hyperpod_scheduler.store.records import ClusterRecord, GroupSize, HistoryEntry, Reach, Snapshot

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
KEY = "111122223333/us-west-2/train"


def _increment(record: ClusterRecord | None) -> ClusterRecord:
    base = record or ClusterRecord.new(KEY, T0)
    count = base.snapshot.sizes["workers"].count if base.snapshot else 0
    return base.evolve(snapshot=Snapshot(taken_at=T0, sizes={"workers": GroupSize(count=count + 1)}, transition_id="t"))


def _hammer(path: str, times: int, start: Any) -> None:
    """Runs in a spawned process: its own interpreter, its own connection."""
    with SqliteStore(path) as store:
        start.wait()  # all workers begin together, so their writes really interleave
        for _ in range(times):
            update(store, KEY, _increment, retries=100_000)


def test_two_processes_lose_no_increment(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    SqliteStore(path).close()  # created up front so both workers start on equal terms
    ctx = multiprocessing.get_context("spawn")
    procs, times = 2, 100
    start = ctx.Barrier(procs)
    workers = [ctx.Process(target=_hammer, args=(str(path), times, start)) for _ in range(procs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0] * procs
    with SqliteStore(path) as store:
        final = store.get(KEY)
    assert final is not None and final.snapshot is not None
    assert final.snapshot.sizes["workers"].count == procs * times
    assert final.version == procs * times


def test_the_file_is_owner_only_in_a_created_directory(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "state.sqlite"
    with SqliteStore(path) as store:
        store.put(ClusterRecord.new(KEY, T0), None)
        for f in path.parent.iterdir():  # the database and its -wal/-shm companions
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f.name
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_data_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    with SqliteStore(path) as store:
        stored = store.put(ClusterRecord.new(KEY, T0).evolve(applied_state="stopped"), None)
        store.append_history(HistoryEntry(key=KEY, at=T0, action="stop", actor="t", outcome="ok"))
        store.acquire_lease(KEY, "a", 60, T0)
    with SqliteStore(path) as store:
        assert store.get(KEY) == stored
        assert len(store.history(KEY)) == 1
        assert not store.acquire_lease(KEY, "b", 60, T0)


def test_the_schema_version_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone() == ("2",)


def test_a_file_from_a_newer_release_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value='7' WHERE name='schema_version'")
    with pytest.raises(StoreError, match="schema version '7' is newer"):
        SqliteStore(path)


def _damage(path: Path, sql: str, *args: object) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql, args)
    conn.close()


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("not json at all", "Invalid JSON"),
        ('{"key": "111122223333/us-west-2/train"}', "updated_at"),
        ('{"key": "someone/else/c", "updated_at": "2026-03-02T08:00:00Z"}', "someone/else/c"),
    ],
)
def test_a_damaged_record_names_its_key(tmp_path: Path, body: str, why: str) -> None:
    path = tmp_path / "state.sqlite"
    with SqliteStore(path) as store:
        store.put(ClusterRecord.new(KEY, T0), None)
        store.put(ClusterRecord.new("fine/r/c", T0), None)
    _damage(path, "UPDATE records SET body = ? WHERE key = ?", body, KEY)
    with SqliteStore(path) as store:
        with pytest.raises(CorruptRecordError) as err:
            store.get(KEY)
        message = str(err.value)
        assert f"'{KEY}'" in message and why in message and "\n" not in message
        assert store.get("fine/r/c") is not None  # the rest of the store still works
        assert store.list_keys() == ["111122223333/us-west-2/train", "fine/r/c"]


@pytest.mark.parametrize("version", ["two", -1])
def test_a_damaged_version_column_names_its_key(tmp_path: Path, version: object) -> None:
    path = tmp_path / "state.sqlite"
    with SqliteStore(path) as store:
        store.put(ClusterRecord.new(KEY, T0), None)
    _damage(path, "UPDATE records SET version = ? WHERE key = ?", version, KEY)
    with SqliteStore(path) as store, pytest.raises(CorruptRecordError) as err:
        store.get(KEY)
    message = str(err.value)
    assert f"'{KEY}'" in message and repr(version) in message and "\n" not in message


def test_a_damaged_history_entry_names_its_key(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    with SqliteStore(path) as store:
        store.append_history(HistoryEntry(key=KEY, at=T0, action="stop", actor="t", outcome="ok"))
    _damage(path, "UPDATE history SET body = '[1, 2'")
    with SqliteStore(path) as store, pytest.raises(CorruptRecordError, match=KEY):
        store.history(KEY)


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    path.write_bytes(b"this is not sqlite, just some text that happens to be long enough " * 20)
    with pytest.raises(StoreError, match=str(path)):
        SqliteStore(path)


def test_an_uncreatable_location_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="cannot create"):
        SqliteStore(blocker / "state.sqlite")


# ---- choosing a store ----------------------------------------------------------------------------


def test_open_store_understands_urls_and_paths(tmp_path: Path) -> None:
    assert isinstance(open_store("memory:"), MemoryStore)
    cases: list[tuple[str | Path, Path]] = [
        (f"sqlite://{tmp_path}/a.sqlite", tmp_path / "a.sqlite"),
        (f"sqlite:{tmp_path}/b.sqlite", tmp_path / "b.sqlite"),
        (str(tmp_path / "c.sqlite"), tmp_path / "c.sqlite"),
        (tmp_path / "d.sqlite", tmp_path / "d.sqlite"),
    ]
    for location, expected in cases:
        store = open_store(location)
        assert isinstance(store, SqliteStore) and store.path == expected
        store.close()
        assert expected.exists()


def test_open_store_falls_back_to_the_environment_then_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, f"sqlite://{tmp_path}/env.sqlite")
    with open_store(None) as store:
        assert isinstance(store, SqliteStore) and store.path == tmp_path / "env.sqlite"
    with open_store(str(tmp_path / "param.sqlite")) as store:  # a parameter beats the environment
        assert isinstance(store, SqliteStore) and store.path == tmp_path / "param.sqlite"
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    expected = tmp_path / "home" / ".local" / "state" / "hyperpod-scheduler" / "state.sqlite"
    assert default_path() == expected
    with open_store(None) as store:
        assert isinstance(store, SqliteStore) and store.path == expected
    assert stat.S_IMODE(os.stat(expected).st_mode) == 0o600


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("dynamodb://", "names no table"),
        ("postgres://db/state", "unknown scheme 'postgres'"),
        ("sqlite://", "names no file"),
    ],
)
def test_open_store_rejects_what_it_cannot_open(location: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        open_store(location)


# ---- a store is never silently empty -------------------------------------------------------------


def _stored_then(path: Path) -> None:
    with SqliteStore(path) as store:
        store.put(ClusterRecord.new(KEY, T0).evolve(applied_state="stopped"), None)


def test_a_file_truncated_to_zero_bytes_is_an_error_naming_it_never_a_fresh_store(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    _stored_then(path)
    path.write_bytes(b"")  # a full disk, a bad copy, a `> state.sqlite`
    with pytest.raises(StoreError) as err:
        SqliteStore(path)
    assert str(path) in str(err.value) and "empty" in str(err.value) and "\n" not in str(err.value)
    assert path.stat().st_size == 0, "the damaged file must be left as it was found, not turned into a store"


def test_a_database_without_the_schema_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE something_else (x INTEGER)")
    with pytest.raises(StoreError, match=f"{path}.*not a hyperpod-scheduler state store"):
        SqliteStore(path)
    with sqlite3.connect(path) as conn:  # nothing was added to someone else's database
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["something_else"]


@pytest.mark.parametrize("version", ["²", "x", ""])
def test_a_damaged_schema_version_is_an_error_naming_it(tmp_path: Path, version: str) -> None:
    # '²' is a digit to str.isdigit and not to int(): the store ended as an internal error (exit 70).
    path = tmp_path / "state.sqlite"
    _stored_then(path)
    _damage(path, f"UPDATE meta SET value = '{version}' WHERE name = 'schema_version'")
    with pytest.raises(StoreError, match=f"{path}: its schema version is '{version}'; the file is damaged"):
        SqliteStore(path)


def test_a_store_missing_one_of_its_tables_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    _stored_then(path)
    _damage(path, "DROP TABLE records")
    with pytest.raises(StoreError, match=f"{path}.*table 'records' is missing"):
        SqliteStore(path)


def test_a_new_store_is_created_only_where_no_file_existed(tmp_path: Path) -> None:
    path = tmp_path / "new" / "state.sqlite"
    with SqliteStore(path) as store:
        assert store.list_keys() == []
    # No half-made file is ever visible under the store's name: creation happens aside, then is linked.
    assert sorted(p.name for p in path.parent.iterdir() if not p.name.startswith("state.sqlite")) == []
    with SqliteStore(path) as store:  # reopening finds the schema it made
        assert store.list_keys() == []


def test_a_creation_interrupted_before_the_link_leaves_no_store_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.sqlite"

    def killed(*_args: object) -> None:
        raise KeyboardInterrupt  # the process dies between building the schema and publishing it

    monkeypatch.setattr(os, "link", killed)
    with pytest.raises(KeyboardInterrupt):
        SqliteStore(path)
    monkeypatch.undo()
    assert not path.exists(), "an interrupted creation must not leave an empty file that later reads as a store"
    with SqliteStore(path) as store:
        assert store.list_keys() == []


def test_a_file_of_schema_1_is_migrated_in_place_keeping_its_records(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    _stored_then(path)
    _damage(path, "DROP TABLE accounts")
    _damage(
        path, "UPDATE meta SET value = '1' WHERE name = 'schema_version'"
    )  # as a release before account keys left it
    with SqliteStore(path) as store:
        assert store.get(KEY) is not None and store.get(KEY).applied_state == "stopped"  # type: ignore[union-attr]
        store.bind_account(Reach("", "us-west-2", "train"), "111122223333")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone() == ("2",)


def test_account_bindings_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    with SqliteStore(path) as store:
        store.bind_account(Reach("prod", "us-east-1", "train"), "111111111111")
    with SqliteStore(path) as store:
        assert store.account_for(Reach("prod", "us-east-1", "train")) == "111111111111"
