"""Record identity: a record is keyed by (account, region, name), the account read from the cluster's
ARN once per profile and remembered; records from before account keys are given to the account whose
cluster they fit, and refused when that could be guessing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.engine import crashpoints
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick, turn
from hyperpod_scheduler.engine.planner import ScheduleState
from hyperpod_scheduler.engine.runner import ClusterRef, Engine
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.memory import MemoryStore
from hyperpod_scheduler.store.records import ClusterRecord, GroupSize, HistoryEntry, Reach, Snapshot
from tests.engine.conftest import START, settle
from tests.reliability.harness import account_emulator, small_request
from tests.sessions import shared_session

A, B = "111111111111", "222222222222"
OLD_KEY = "default/us-east-1/train"


class World:
    """Two accounts' emulators, each with ``train``; profile -> emulator is a switchable map."""

    def __init__(self, a: Emulator, b: Emulator) -> None:
        self.emus = {A: a, B: b}
        self.calls: Counter[str] = Counter()
        self.clients = {acct: self._client(e) for acct, e in self.emus.items()}
        self.route = {"prod": A, "dev": B, "": A}
        self.store = MemoryStore()
        self.events = Collector()
        for acct, workers in ((A, 8), (B, 2)):
            self.clients[acct].create_cluster(**small_request("train", cpu=workers))
            settle(self.emus[acct], self.clients[acct], "train")
        self.calls.clear()

    def _client(self, emu: Emulator) -> Any:
        session = shared_session()
        client = session.client("sagemaker", endpoint_url=emu.endpoint)
        client.meta.events.register("before-call.sagemaker.*", lambda model, **_: self.calls.update([model.name]))
        return client

    def engine(self) -> Engine:
        def sleep(seconds: float) -> None:
            for e in self.emus.values():
                e.advance(seconds)

        return Engine(
            self.store,
            lambda ref: self.clients[self.route[ref.profile or ""]],
            self.emus[A].clock.now,
            events=self.events,
            sleep=sleep,
        )

    def settle(self) -> None:
        for acct, e in self.emus.items():
            settle(e, self.clients[acct], "train")

    def workers(self, acct: str) -> int:
        d = self.clients[acct].describe_cluster(ClusterName="train")
        return next(g["TargetCount"] for g in d["InstanceGroups"] if g["InstanceGroupName"] == "cpu")

    def old_record(self, workers: int, **kw: Any) -> None:
        """What a release before account keys left behind: prod stopped with ``workers`` recorded."""
        sizes = {"controller": GroupSize(count=1, instance_type="ml.m5.xlarge")}
        sizes["cpu"] = GroupSize(count=workers, instance_type="ml.c5.xlarge")
        snapshot = Snapshot(taken_at=START, sizes=sizes, transition_id="stop@old")
        record = ClusterRecord.new(OLD_KEY, START).evolve(
            snapshot=snapshot, applied_state="stopped", applied_transition_at=START, **kw
        )
        self.store.put(record, expected_version=None)


@pytest.fixture
def world() -> Iterator[World]:
    with (
        account_emulator(A, virtual_start=START, seed=1, in_process=True) as a,
        account_emulator(B, virtual_start=START, seed=2, in_process=True) as b,
    ):
        yield World(a, b)


def ref(profile: str, namesakes: tuple[str, ...] = ()) -> ClusterRef:
    r = ref_for("train", "us-east-1", profile or None)
    return ClusterRef(r.key, r.name, r.region, r.profile, namesakes=namesakes)


def _stop_by_hand(world: World, acct: str) -> None:
    """Zero ``acct``'s cluster as the old release did (the record says so)."""
    client = world.clients[acct]
    d = client.describe_cluster(ClusterName="train")
    keep = ("InstanceGroupName", "InstanceType", "ExecutionRole", "SlurmConfig", "InstanceStorageConfigs")
    groups = [{**{k: g[k] for k in keep if k in g}, "InstanceCount": 0} for g in d["InstanceGroups"]]
    client.update_cluster(ClusterName="train", InstanceGroups=groups)
    world.settle()


def test_the_account_is_learned_once_and_a_quiet_tick_then_costs_no_call(world: World) -> None:
    engine = world.engine()
    office = resolve("Mon-Fri 08:00-18:00 UTC", {})
    governed = [Governed(ref("prod"), "office", office, False)]
    tick(engine, governed, world.emus[A].clock.now())  # Monday 06:00: first sight, stop
    world.settle()
    tick(engine, governed, world.emus[A].clock.now())
    assert world.store.list_keys() == [f"{A}/us-east-1/train"]
    assert world.store.account_for(Reach("prod", "us-east-1", "train")) == A
    before = sum(world.calls.values())
    fresh = world.engine()  # a new process: the binding is read from the store, not the cache
    for _ in range(3):
        tick(fresh, governed, world.emus[A].clock.now() + timedelta(minutes=5))
    assert sum(world.calls.values()) == before


def test_a_cluster_never_seen_costs_no_call_while_nothing_is_due(world: World) -> None:
    engine = world.engine()
    stop_only = ScheduleState("stopped", None, allowed=frozenset({"start"}))  # nothing it may do now
    assert turn(engine, ref("prod"), stop_only).kind == "quiet"
    assert sum(world.calls.values()) == 0


def test_a_profile_that_now_reaches_another_account_is_refused_then_claimed(world: World) -> None:
    engine = world.engine()
    assert engine.act(ref("prod"), "stop", transition_id="manual-stop@1", wait=True).kind == "settled"
    world.route["prod"] = B  # the profile was pointed at another account
    result = turn(engine, ref("prod"), ScheduleState("running", world.emus[A].clock.now()))
    assert result.kind == "error" and B in result.message and A in result.message and "claim" in result.message
    assert world.workers(B) == 2, "acted on another account's cluster"
    assert "\n" not in result.message
    message = engine.claim(ref("prod"))
    assert B in message
    assert world.store.account_for(Reach("prod", "us-east-1", "train")) == B
    # From now on prod's records are B's; A's record is kept under A's key, untouched.
    assert world.store.get(f"{A}/us-east-1/train").snapshot.sizes["cpu"].count == 8  # type: ignore[union-attr]


def test_a_record_from_before_account_keys_is_adopted_by_the_cluster_it_fits(world: World) -> None:
    _stop_by_hand(world, A)
    world.old_record(8)
    engine = world.engine()
    result = engine.act(ref("prod"), "start", transition_id="manual-start@1", wait=True)
    assert result.kind == "settled", result
    assert world.workers(A) == 8
    old = world.store.get(OLD_KEY)
    assert old is not None and old.moved_to == f"{A}/us-east-1/train"
    adopted = world.store.get(f"{A}/us-east-1/train")
    assert adopted is not None and adopted.snapshot is not None and adopted.snapshot.sizes["cpu"].count == 8
    assert [e.outcome for e in world.store.history(OLD_KEY)] == ["moved"]


def test_a_record_that_does_not_fit_is_left_for_the_account_it_belongs_to(world: World) -> None:
    _stop_by_hand(world, A)
    world.old_record(8)  # prod's stopped cluster; dev's is running
    engine = world.engine()
    assert engine.act(ref("dev"), "stop", transition_id="manual-stop@1", wait=True).kind == "settled"
    assert world.store.get(OLD_KEY).moved_to is None  # type: ignore[union-attr]
    assert world.store.get(f"{B}/us-east-1/train").snapshot.sizes["cpu"].count == 2  # type: ignore[union-attr]
    assert engine.act(ref("prod"), "start", transition_id="manual-start@1", wait=True).kind == "settled"
    assert world.workers(A) == 8  # prod still found its own 8


def test_a_record_two_accounts_could_own_is_refused_until_claimed(world: World) -> None:
    _stop_by_hand(world, A)
    _stop_by_hand(world, B)
    world.old_record(8)  # fits both: same groups, both stopped
    engine = world.engine()
    office = resolve("Mon-Fri 08:00-18:00 UTC", {})
    governed = [
        Governed(ref("prod", namesakes=("dev",)), "office", office, False),
        Governed(ref("dev", namesakes=("prod",)), "office", office, False),
    ]
    morning = world.emus[A].clock.now().replace(hour=9)
    for e in world.emus.values():
        e.advance((morning - e.clock.now()).total_seconds())
    results = tick(engine, governed, morning)
    assert [r.kind for r in results] == ["error", "error"], results
    assert all("not guessing" in r.message and "claim" in r.message for r in results)
    assert world.workers(A) == 0 and world.workers(B) == 0
    assert "now" in engine.claim(ref("prod", namesakes=("dev",)))
    results = tick(engine, governed, morning + timedelta(minutes=10))
    assert [r.kind for r in results] == ["sent", "noop"], results  # dev has nothing recorded: left as it is
    world.settle()
    assert world.workers(A) == 8 and world.workers(B) == 0


def test_a_move_interrupted_between_its_two_writes_is_finished_by_the_next_look(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stop_by_hand(world, A)
    world.old_record(8)

    class Killed(BaseException):
        pass

    def reached(point: str) -> None:
        if point == "after-mark-moved":
            raise Killed

    monkeypatch.setattr(crashpoints, "reached", reached)
    with pytest.raises(Killed):
        world.engine().act(ref("prod"), "start", transition_id="manual-start@1")
    monkeypatch.undo()
    assert world.store.get(OLD_KEY).moved_to == f"{A}/us-east-1/train"  # type: ignore[union-attr]
    assert world.store.get(f"{A}/us-east-1/train") is None
    assert world.engine().act(ref("prod"), "start", transition_id="manual-start@2", wait=True).kind == "settled"
    assert world.workers(A) == 8


def test_a_record_found_not_to_fit_costs_no_look_on_later_ticks(world: World) -> None:
    _stop_by_hand(world, A)
    world.old_record(8)
    engine = world.engine()
    held = ScheduleState("running", world.emus[B].clock.now() - timedelta(hours=1), allowed=frozenset({"stop"}))
    turn(engine, ref("dev"), ScheduleState("stopped", world.emus[B].clock.now()))  # looks, misfit, stops
    world.settle()
    turn(engine, ref("dev"), ScheduleState("stopped", world.emus[B].clock.now()))  # settles
    world.calls.clear()
    for _ in range(3):
        assert turn(world.engine(), ref("dev"), held).kind == "quiet"
    assert sum(world.calls.values()) == 0
    assert world.store.get(OLD_KEY).misfits == [B]  # type: ignore[union-attr]


def test_a_record_moved_by_another_runner_after_this_turn_read_it_is_moved_once(world: World) -> None:
    # The turn reads the record from before account keys once, to decide what is due, and adopts from
    # that read. Another runner marks it moved in between: the stale read must lose its compare-and-set
    # and be read again, not move the record a second time.
    class MovedMeanwhile(MemoryStore):
        def get(self, key: str) -> ClusterRecord | None:
            found = super().get(key)
            if key == OLD_KEY and found is not None and found.moved_to is None:
                line = HistoryEntry(key=OLD_KEY, at=START, action="migrate", actor="other runner", outcome="moved")
                super().put(found.evolve(moved_to=f"{A}/us-east-1/train"), found.version, history=[line])
            return found

    _stop_by_hand(world, A)
    world.store = MovedMeanwhile()
    world.old_record(8)
    engine = world.engine()
    now = world.emus[A].clock.now()
    result = turn(engine, ref("prod"), ScheduleState("running", now - timedelta(minutes=1)))
    assert result.kind == "sent", result
    world.settle()
    assert world.workers(A) == 8  # the sizes the old record held
    assert [e.actor for e in world.store.history(OLD_KEY)] == ["other runner"]  # moved once, by the other
    adopted = world.store.get(f"{A}/us-east-1/train")
    assert adopted is not None and adopted.pending is not None and adopted.pending.action == "start"


def test_an_answer_from_another_account_is_no_read_of_this_clusters_sizes(world: World) -> None:
    # The profile now reaches account B: its answer was noted as a good read of A's cluster, so A's
    # record said "sizes as of" that instant, of sizes nobody read.
    engine = world.engine()
    assert engine.act(ref("prod"), "stop", transition_id="manual-stop@1", wait=True).kind == "settled"
    world.emus[A].faults = {"error_rate": 1.0}  # A does not answer: its record says since when
    for emu in world.emus.values():
        emu.advance(3600)
    assert turn(engine, ref("prod"), ScheduleState("running", world.emus[A].clock.now())).kind == "error"
    before = world.store.get(f"{A}/us-east-1/train")
    assert before is not None and before.reads is not None and before.reads.failing
    world.emus[A].faults = {"error_rate": 0.0}
    for emu in world.emus.values():
        emu.advance(600)
    world.route["prod"] = B
    assert turn(engine, ref("prod"), ScheduleState("running", world.emus[A].clock.now())).kind == "error"
    after = world.store.get(f"{A}/us-east-1/train")
    assert after is not None and after.reads is not None
    # AWS answered (reachable again), but not with A's sizes: "sizes as of" has not moved.
    assert not after.reads.failing and after.reads.sizes_as_of == before.reads.sizes_as_of
