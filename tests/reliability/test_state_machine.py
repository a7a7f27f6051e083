"""The proof suite: a stateful test that drives the scheduler through what a hostile world draws.

Hypothesis strings together schedule ticks, manual stops and starts (waiting or not), holds and
releases, kills at every crash point (in-process: the crash point raises and the engine is thrown
away, its lease left behind), the clock jumping (so dead runners' leases lapse), capacity rollbacks,
throttling and 500s, and UpdateCluster answers lost after the emulator applied them (a read timeout
or a 500). The emulator runs on a virtual clock; what reaches its model is recorded where it lands.

Invariants, after every step:
- every remembered size survives: a record's snapshot is always the sizes the cluster really had, and
  a cluster at zero always has one;
- no transition is sent twice: every UpdateCluster the model accepts changes the cluster's target
  counts, and none reaches it while the cluster is still busy with an earlier one;
- a manual action never does its opposite (a manual start never sends a stop, and the other way
  round), and no tick acts against an active hold;
and at the end, once the faults stop, the fleet converges to what the schedule wants.

CI draws a bounded number of examples; ``--run-slow`` (or HYPERPOD_SCHEDULER_RUN_SLOW=1) many more.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import BotoCoreError, ClientError, ReadTimeoutError
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from hyperpod_scheduler.config.model import Policy
from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.emulator.capacity import CapacityModel
from hyperpod_scheduler.emulator.errors import EmulatorError
from hyperpod_scheduler.engine import crashpoints
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import Governed, ref_for, schedule_state, tick
from hyperpod_scheduler.engine.planner import effective_hold
from hyperpod_scheduler.engine.ref import ClusterSettings
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.memory import MemoryStore
from hyperpod_scheduler.store.records import ClusterRecord
from tests.conftest import run_slow
from tests.reliability.fleet_sim import MONDAY_6AM, TEST_RETRIES, instant_retries
from tests.reliability.harness import ACCOUNT, small_request
from tests.sessions import shared_session

pytestmark = pytest.mark.long_run  # one Hypothesis state machine, the longest test here

NAMES = ("sm-0", "sm-1")
SIZES = {"controller": 1, "cpu": 2}
ZERO = {"controller": 0, "cpu": 0}
# sm-1's own target keeps one cpu node up overnight (and its controller with it); sm-0's zeroes all.
FLOORED = ClusterSettings(policy=Policy(groups={"cpu": {"floor": 1}}), governed_by="targets[1]")
KEPT = {"controller": 1, "cpu": 1}
SCHEDULE = "Mon-Fri 08:00-18:00 UTC"
LEASE_S = 900.0
POINTS = (None, *crashpoints.ALL)


class Killed(BaseException):
    """The process died at a crash point (a BaseException: no containment may swallow it)."""


@dataclass(frozen=True)
class Landed:
    cluster: str
    doing: str  # "tick", "manual-start", "manual-stop"
    before: dict[str, int]
    after: dict[str, int]
    held: str | None  # the hold in force when it landed
    at: datetime  # the engine's clock when it landed (stepped back or forward by the_clock_steps)
    lived: datetime  # the latest clock reading the scheduler had seen by then


class Fleet(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.stack = ExitStack()
        self.stack.enter_context(instant_retries())
        self.emu = self.stack.enter_context(running_emulator(virtual_start=MONDAY_6AM, seed=17, in_process=True))
        for name in NAMES:
            self.emu.backend.dispatch("CreateCluster", small_request(name))
        self.emu.advance(1800)
        self.store = MemoryStore()
        self.events = Collector()
        self.doing = "tick"
        self.landed: list[Landed] = []
        self.refused: list[tuple[str, str, str]] = []
        self.armed: str | None = None  # the crash point that kills the next engine reaching it
        self.drop: str | None = None  # "timeout" | "500": the next UpdateCluster's answer is lost
        self.skew = timedelta(0)  # the host's clock against the world's (NTP, a restored VM)
        self.lived = self.emu.clock.now()
        self._ledger()
        session = shared_session()
        self.client = session.client("sagemaker", endpoint_url=self.emu.endpoint, config=TEST_RETRIES)
        self.client.meta.events.register_first("before-send.sagemaker.UpdateCluster", self._lose_answer)
        saved = crashpoints.reached
        crashpoints.reached = self._reached  # type: ignore[assignment]
        self.stack.callback(setattr, crashpoints, "reached", saved)
        schedule = resolve(SCHEDULE, {})
        # One cluster follows the schedule only at its transitions, the other is enforced every tick;
        # neither account is known yet: the engine learns it from the ARN.
        self.governed = [
            Governed(ref_for(NAMES[0], "us-east-1"), "office", schedule, False),
            Governed(ref_for(NAMES[1], "us-east-1").governed(FLOORED), "office", schedule, True),
        ]
        self.engine = self._engine()

    # ---- the rig ------------------------------------------------------------------------------------
    def now(self) -> datetime:
        """The scheduler's clock: the world's, stepped by ``skew``."""
        now = self.emu.clock.now() + self.skew
        self.lived = max(self.lived, now)
        return now

    def _engine(self) -> Engine:
        return Engine(self.store, lambda _ref: self.client, self.now, events=self.events, sleep=self.emu.advance)

    def _reached(self, point: str) -> None:
        if self.armed == point:
            self.armed = None
            raise Killed(point)

    def _ledger(self) -> None:
        original = self.emu.backend.dispatch

        def targets(name: str) -> dict[str, int]:
            d = original("DescribeCluster", {"ClusterName": name})
            return {g["InstanceGroupName"]: g.get("TargetCount", g["CurrentCount"]) for g in d["InstanceGroups"]}

        def dispatch(operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
            if operation != "UpdateCluster":
                return original(operation, params, **kw)
            name = str(params["ClusterName"])
            before = targets(name)
            try:
                result = original(operation, params, **kw)
            except EmulatorError as exc:
                last = next((u.doing for u in reversed(self.landed) if u.cluster == name), None)
                self.refused.append((name, self.doing, f"{exc.code} while busy with {last}'s update"))
                raise
            self.landed.append(
                Landed(name, self.doing, before, targets(name), self._held(name), self.now(), self.lived)
            )
            return result

        self.emu.backend.dispatch = dispatch  # type: ignore[method-assign]

    def _lose_answer(self, request: Any, **_: Any) -> AWSResponse | None:
        """Applied by the emulator, answer lost on the way back: what botocore must not retry blind."""
        if self.drop is None:
            return None
        how, self.drop = self.drop, None
        self.emu.backend.dispatch("UpdateCluster", json.loads(request.body))
        if how == "timeout":
            raise ReadTimeoutError(endpoint_url=request.url)
        return AWSResponse(request.url, 500, {}, _Raw(b'{"__type": "InternalFailure", "message": "lost"}'))

    def _record(self, name: str) -> ClusterRecord | None:
        return self.store.get(ref_for(name, "us-east-1", account=ACCOUNT).key)

    def _held(self, name: str) -> str | None:
        record = self._record(name)
        return effective_hold(record, self.now())

    def _targets(self, name: str) -> tuple[str, dict[str, int]]:
        d = self.emu.backend.dispatch("DescribeCluster", {"ClusterName": name})
        return d["ClusterStatus"], {g["InstanceGroupName"]: g.get("TargetCount", 0) for g in d["InstanceGroups"]}

    def _run(self, doing: str, kill_at: str | None, work: Any) -> None:
        self.doing, self.armed = doing, kill_at
        try:
            work()
        except Killed:
            self.engine = self._engine()  # the process is gone; a new one starts (its lease stays behind)
        except (HyperpodSchedulerError, ClientError, BotoCoreError):
            # A command (not a tick: a tick never raises) may fail on a call botocore gave up on; the CLI
            # prints that as one line and exits 1. What it left behind is what the invariants judge.
            assert doing != "tick", "a tick raised instead of reporting the cluster's error"
        finally:
            self.doing, self.armed = "tick", None

    # ---- what the world does -------------------------------------------------------------------------
    @rule(kill_at=st.sampled_from(POINTS))
    def a_tick(self, kill_at: str | None) -> None:
        self._run("tick", kill_at, lambda: tick(self.engine, self.governed, self.now()))

    @rule(
        which=st.sampled_from(NAMES),
        action=st.sampled_from(["stop", "start"]),
        wait=st.booleans(),
        kill_at=st.sampled_from(POINTS),
    )
    def a_manual_command(self, which: str, action: str, wait: bool, kill_at: str | None) -> None:
        ref = next(g.ref for g in self.governed if g.ref.name == which)
        engine = self._engine()  # a command is its own process
        now = self.now()

        def work() -> None:
            engine.act(ref, action, transition_id=f"manual-{action}@{now.isoformat()}", wait=wait, poll_seconds=30)  # type: ignore[arg-type]

        self._run(f"manual-{action}", kill_at, work)

    @rule(
        which=st.sampled_from(NAMES), state=st.sampled_from(["running", "stopped"]), hours=st.sampled_from([None, 1, 6])
    )
    def a_hold(self, which: str, state: str, hours: int | None) -> None:
        ref = next(g.ref for g in self.governed if g.ref.name == which)
        until = None if hours is None else self.now() + timedelta(hours=hours)
        self._run("hold", None, lambda: self._engine().set_hold(ref, state, until))  # type: ignore[arg-type]

    @rule(which=st.sampled_from(NAMES))
    def a_release(self, which: str) -> None:
        ref = next(g.ref for g in self.governed if g.ref.name == which)
        self._run("release", None, lambda: self._engine().release(ref))

    @rule(minutes=st.sampled_from([1, 5, 10, 20, 60, 240]))
    def time_passes(self, minutes: int) -> None:
        self.emu.advance(minutes * 60)

    @rule(hours=st.sampled_from([-1, 1]), across=st.booleans())
    def the_clock_steps(self, hours: int, across: bool) -> None:
        """The host's clock is stepped an hour back or forward; ``across``: just after the next scheduled
        transition was ticked, so the step crosses it. The emulator's (the world's) clock goes on as it
        was. Bounded: the host is never more than an hour off."""
        if across:
            upcoming = self.governed[0].schedule.next_transition(self.now())
            assert upcoming is not None
            self.emu.advance((upcoming.at - self.now()).total_seconds() + 300)
            for _ in range(3):  # the transition is sent and settles before the step
                self.a_tick(None)
                self.emu.advance(600)
        self.skew = max(timedelta(hours=-1), min(timedelta(hours=1), self.skew + timedelta(hours=hours)))

    @rule(throttle=st.sampled_from([0.0, 0.3]), errors=st.sampled_from([0.0, 0.1, 0.4]), seed=st.integers(0, 2**16))
    def the_api_misbehaves(self, throttle: float, errors: float, seed: int) -> None:
        # A drawn seed: the same seed would replay the same few faults every time the rule fires.
        self.emu.faults = {"throttle_rate": throttle, "error_rate": errors, "latency_ms": 0, "seed": seed}

    @rule(how=st.sampled_from(["timeout", "500"]))
    def the_next_answer_is_lost(self, how: str) -> None:
        self.drop = how

    @rule(which=st.sampled_from(NAMES))
    def someone_else_updates_the_cluster(self, which: str) -> None:
        """An UpdateCluster from outside that changes no count (a console edit, another tool): the
        cluster is Updating for a while, and it is not the scheduler's update."""
        d = self.emu.backend.dispatch("DescribeCluster", {"ClusterName": which})
        if d["ClusterStatus"] != "InService":
            return
        g = d["InstanceGroups"][-1]
        keep = ("InstanceGroupName", "InstanceType", "ExecutionRole", "SlurmConfig", "InstanceStorageConfigs")
        same = {**{k: g[k] for k in keep if k in g}, "InstanceCount": g.get("TargetCount", g["CurrentCount"])}
        self.doing = "someone-else"
        try:
            self.emu.backend.dispatch("UpdateCluster", {"ClusterName": which, "InstanceGroups": [same]})
        finally:
            self.doing = "tick"

    @rule()
    def capacity_runs_out_once(self) -> None:
        self.emu.backend.set_capacity(
            CapacityModel.from_dict({"failures": {"fail_next_launches": {"ml.c5.xlarge": 1}}})
        )

    # ---- what must hold -------------------------------------------------------------------------------
    @invariant()
    def every_remembered_size_survives(self) -> None:
        for name in NAMES:
            record = self._record(name)
            if record is not None and record.snapshot is not None:
                sizes = {n: s.count for n, s in record.snapshot.sizes.items()}
                assert sizes == SIZES, f"{name}: remembered {sizes}, the cluster had {SIZES}"
            _status, targets = self._targets(name)
            if targets == ZERO:
                assert record is not None and record.snapshot is not None, f"{name} is at zero with no sizes remembered"

    @invariant()
    def no_transition_is_sent_twice(self) -> None:
        for update in self.landed:
            if update.doing != "someone-else":
                assert update.before != update.after, (
                    f"{update.cluster}: an UpdateCluster that changed nothing (a resend)"
                )
        # Refused is fine only when someone else's update had the cluster busy (ours then waits for it).
        ours = [r for r in self.refused if r[1] != "someone-else"]
        assert not ours, f"UpdateCluster sent while the cluster was still busy with our own: {ours}"

    @invariant()
    def a_manual_action_never_does_its_opposite(self) -> None:
        for u in self.landed:
            down = any(u.after[g] < u.before.get(g, 0) for g in u.after)
            up = any(u.after[g] > u.before.get(g, 0) for g in u.after)
            assert not (u.doing == "manual-start" and down), f"{u.cluster}: a manual start sent a stop"
            assert not (u.doing == "manual-stop" and up), f"{u.cluster}: a manual stop sent a start"
            assert not (u.doing == "tick" and u.held == "running" and down), f"{u.cluster}: stopped while held running"
            assert not (u.doing == "tick" and u.held == "stopped" and up), f"{u.cluster}: started while held stopped"

    @invariant()
    def each_cluster_is_judged_by_its_own_target(self) -> None:
        # Whoever stops sm-1 (a tick, a manual stop, a hold), its floor keeps one cpu node; sm-0 has none.
        for u in self.landed:
            if u.cluster == NAMES[1] and u.doing != "someone-else":
                assert u.after.get("cpu", 1) >= 1 or u.before.get("cpu", 0) == 0, f"sm-1 zeroed past its floor: {u}"

    @invariant()
    def a_stepped_clock_never_undoes_a_newer_transition(self) -> None:
        # A tick that reverses what a tick did at a later clock reading decided from a past the fleet has
        # already lived through: the extra start (or stop) of a clock stepped back across a transition.
        schedule = self.governed[0].schedule
        for i, u in enumerate(self.landed):
            if u.doing != "tick" or u.held is not None:
                continue
            up = any(u.after[g] > u.before.get(g, 0) for g in u.after)
            then, newest = schedule_state(schedule, u.at).desired, schedule_state(schedule, u.lived).desired
            if then != newest:  # behind a transition already lived through: acting on the old wish
                assert (then == "running") != up, (
                    f"{u.cluster}: a tick at {u.at} (lived {u.lived}) acted on the past: {u}"
                )
            for v in self.landed[:i]:
                if v.cluster != u.cluster or v.doing != "tick" or v.held is not None or v.at <= u.at:
                    continue
                v_up = any(v.after[g] > v.before.get(g, 0) for g in v.after)
                assert v_up == up, f"{u.cluster}: a tick at {u.at} reversed the tick at {v.at}: {u}"

    def teardown(self) -> None:
        try:
            self._converges()
        finally:
            self.stack.close()

    def _converges(self) -> None:
        """Faults stop, holds are released, dead runners' leases lapse and the schedule turns once more:
        within a bounded number of ticks every cluster is where the schedule wants it, nothing pending."""
        self.emu.faults = {"throttle_rate": 0.0, "error_rate": 0.0, "latency_ms": 0}
        self.drop, self.armed = None, None
        self.emu.backend.set_capacity(CapacityModel.default())
        for g in self.governed:
            self._engine().release(g.ref)
        self.emu.advance(LEASE_S + 60)
        schedule = self.governed[0].schedule
        upcoming = schedule.next_transition(self.now())
        assert upcoming is not None
        self.emu.advance((upcoming.at - self.now()).total_seconds() + 60)
        engine = self._engine()
        for _ in range(30):
            tick(engine, self.governed, self.now())
            if self._settled(schedule_state(schedule, self.now()).desired):
                return
            self.emu.advance(600)
        wanted = schedule_state(schedule, self.now()).desired
        states = {n: (self._targets(n), self._record(n)) for n in NAMES}
        raise AssertionError(f"did not converge to {wanted} after the faults stopped: {states}")

    def _settled(self, wanted: str) -> bool:
        for name in NAMES:
            goal = SIZES if wanted == "running" else (KEPT if name == NAMES[1] else ZERO)
            status, targets = self._targets(name)
            record = self._record(name)
            if status != "InService" or targets != goal or record is None or record.pending is not None:
                return False
            d = self.emu.backend.dispatch("DescribeCluster", {"ClusterName": name})
            if any(g["CurrentCount"] != g.get("TargetCount", 0) for g in d["InstanceGroups"]):
                return False
        return True


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body

    def read(self, *_: Any) -> bytes:
        body, self._body = self._body, b""
        return body


def _settings(slow: bool) -> settings:
    return settings(
        max_examples=300 if slow else 15,
        stateful_step_count=50 if slow else 25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        derandomize=not slow,  # CI replays the same bounded draw; the long run explores
        database=None,
    )


def test_the_scheduler_survives_a_hostile_world(pytestconfig: pytest.Config) -> None:
    run_state_machine_as_test(Fleet, settings=_settings(run_slow(pytestconfig)))


def test_the_stepped_clock_rule_and_its_invariant_catch_an_extra_transition() -> None:
    """The bounded draw may not string a step back right after a transition; this fixed path does:
    the 08:00 start is ticked, the host's clock goes back an hour, and the next tick must not stop the
    enforced sm-1 again (it would without the planner's stepped-back guard)."""
    fleet = Fleet()
    try:
        fleet.the_clock_steps(-1, True)
        fleet.a_tick(None)
        fleet.emu.advance(600)
        fleet.a_tick(None)
        fleet.a_stepped_clock_never_undoes_a_newer_transition()
        assert fleet._targets(NAMES[1])[1] == SIZES
    finally:
        fleet.stack.close()
