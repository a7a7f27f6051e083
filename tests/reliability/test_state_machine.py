"""The proof suite: a stateful test that drives the scheduler through what a hostile world draws.

Hypothesis strings together schedule ticks, manual stops and starts (waiting or not), holds and
releases, kills at every crash point (in-process: the crash point raises and the engine is thrown
away, its lease left behind), the clock jumping (so dead runners' leases lapse), capacity rollbacks,
throttling and 500s, UpdateCluster answers lost after the emulator applied them (a read timeout
or a 500), deep health checks switched on and off, groups and whole clusters replaced while stopped,
and (on a moto DynamoDB store) the store's writes applied with their answers lost. The emulator runs on
a virtual clock; what reaches its model is recorded where it lands.

Invariants, after every step:
- every remembered size survives: a record's snapshot is always the sizes the cluster really had, and
  a cluster at zero always has one;
- no transition is sent twice: every UpdateCluster the model accepts changes the cluster's target
  counts, and none reaches it while the cluster is still busy with an earlier one;
- a manual action never does its opposite (a manual start never sends a stop, and the other way
  round), and no tick acts against an active hold;
- a restore never lands on a different group or cluster;
- a command is sent, or refused with a non-zero exit, never dropped;
and at the end, once the faults stop, the fleet converges to what the schedule wants.

CI draws a bounded number of examples; ``--run-slow`` (or HYPERPOD_SCHEDULER_RUN_SLOW=1) many more.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
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

from hyperpod_scheduler.app import outcomes
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
from hyperpod_scheduler.store.base import StateStore
from hyperpod_scheduler.store.memory import MemoryStore
from hyperpod_scheduler.store.records import ClusterRecord
from tests.conftest import run_slow
from tests.reliability.fleet_sim import MONDAY_6AM, TEST_RETRIES, instant_retries
from tests.reliability.harness import ACCOUNT, small_request
from tests.sessions import shared_session
from tests.store.dynamodb_mock import DYNAMODB_TABLE, clear_table, mocked_dynamodb, open_dynamodb

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
NEW_TYPE = "ml.c5.2xlarge"  # what a replaced cpu group runs instead of ml.c5.xlarge
# What the engine's line says: it went out (or our own update of that kind already sent is followed),
# or nothing was sent. The exit a person sees is the product's own mapping (``app.outcomes``).
SENT = ("sent", "in-progress", "settled")
NOT_SENT = ("skip", "waiting", "refused", "blocked")
KINDS = (*SENT, *NOT_SENT, "noop", "failed", "error")  # what a manual stop or start may answer
WRITES = ("PutItem", "TransactWriteItems", "UpdateItem", "DeleteItem")  # the store's conditional writes


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
    transition: str | None  # the transition the record's intent names when it landed
    strangers: tuple[str, ...]  # groups it raised above anything that group (that ARN, that type) had


@dataclass(frozen=True)
class Command:
    """A manual stop or start as the CLI would report it."""

    cluster: str
    action: str
    wait: bool
    transition_id: str
    kind: str
    message: str
    first: int  # index in ``landed`` of the first update that could be its own


class Fleet(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.stack = ExitStack()
        self.stack.enter_context(instant_retries())
        self.emu = self.stack.enter_context(running_emulator(virtual_start=MONDAY_6AM, seed=17, in_process=True))
        self.store = self._open_store()
        self.events = Collector()
        self.doing = "tick"
        self.landed: list[Landed] = []
        self.refused: list[tuple[str, str, str]] = []
        self.commands: list[Command] = []
        self.unsent: dict[str, Command] = {}  # transition id -> the command that said nothing was sent
        # The most each (cluster ARN, group, instance type) ever had: a restore above it is onto another group.
        self.seen: dict[tuple[str, str, str], int] = {}
        self.replaced: dict[str, tuple[str, datetime]] = {}  # cluster -> (the change, when), while stopped
        self.armed: str | None = None  # the crash point that kills the next engine reaching it
        self.drop: str | None = None  # "timeout" | "500": the next UpdateCluster's answer is lost
        self.skew = timedelta(0)  # the host's clock against the world's (NTP, a restored VM)
        self.lived = self.emu.clock.now()
        self._ledger()
        for name in NAMES:
            self.emu.backend.dispatch("CreateCluster", small_request(name))
        self.emu.advance(1800)
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
    def _open_store(self) -> StateStore:
        return MemoryStore()

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

        def shape(name: str) -> tuple[str, dict[str, int], dict[str, str]]:
            d = original("DescribeCluster", {"ClusterName": name})
            groups = d["InstanceGroups"]
            counts = {g["InstanceGroupName"]: g.get("TargetCount", g["CurrentCount"]) for g in groups}
            return d["ClusterArn"], counts, {g["InstanceGroupName"]: g.get("InstanceType", "") for g in groups}

        def remember(arn: str, counts: dict[str, int], types: dict[str, str]) -> None:
            for g, n in counts.items():
                self.seen[(arn, g, types[g])] = max(n, self.seen.get((arn, g, types[g]), 0))

        def dispatch(operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
            if operation == "CreateCluster":
                result = original(operation, params, **kw)
                remember(*shape(str(params["ClusterName"])))
                return result
            if operation != "UpdateCluster":
                return original(operation, params, **kw)
            name = str(params["ClusterName"])
            _arn, before, _types = shape(name)
            try:
                result = original(operation, params, **kw)
            except EmulatorError as exc:
                last = next((u.doing for u in reversed(self.landed) if u.cluster == name), None)
                self.refused.append((name, self.doing, f"{exc.code} while busy with {last}'s update"))
                raise
            arn, after, types = shape(name)
            strangers = tuple(
                f"{g} ({types[g]}) to {n} on {arn}"
                for g, n in after.items()
                if n > before.get(g, 0) and n > self.seen.get((arn, g, types[g]), 0)
            )
            remember(arn, after, types)
            record = self._record(name)
            transition = record.pending.transition_id if record is not None and record.pending is not None else None
            held = effective_hold(record, self.now())
            self.landed.append(
                Landed(name, self.doing, before, after, held, self.now(), self.lived, transition, strangers)
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

    def _targets(self, name: str) -> tuple[str, dict[str, int]]:
        d = self.emu.backend.dispatch("DescribeCluster", {"ClusterName": name})
        return d["ClusterStatus"], {g["InstanceGroupName"]: g.get("TargetCount", 0) for g in d["InstanceGroups"]}

    def _run(self, doing: str, kill_at: str | None, work: Any) -> Any:
        """What ``work`` returned; None if it died at a crash point or raised (the CLI's exit 1)."""
        self.doing, self.armed = doing, kill_at
        try:
            return work()
        except Killed:
            self.engine = self._engine()  # the process is gone; a new one starts (its lease stays behind)
        except (HyperpodSchedulerError, ClientError, BotoCoreError):
            # A command (not a tick: a tick never raises) may fail on a call botocore gave up on; the CLI
            # prints that as one line and exits 1. What it left behind is what the invariants judge.
            assert doing != "tick", "a tick raised instead of reporting the cluster's error"
        finally:
            self.doing, self.armed = "tick", None
        return None

    def _describe(self, name: str) -> dict[str, Any]:
        return self.emu.backend.dispatch("DescribeCluster", {"ClusterName": name})

    def _stopped_and_quiet(self, name: str) -> bool:
        """Stopped by the scheduler, nothing in flight, the cluster InService and settled."""
        record = self._record(name)
        if record is None or record.applied_state != "stopped" or record.pending is not None:
            return False
        d = self._describe(name)
        settled = all(g["CurrentCount"] == g.get("TargetCount", 0) for g in d["InstanceGroups"])
        return d["ClusterStatus"] == "InService" and settled

    def _until_in_service(self, name: str, gone: bool = False) -> None:
        for _ in range(24):
            self.emu.advance(300)
            try:
                d = self._describe(name)
            except EmulatorError:
                if gone:
                    return
                raise
            if not gone and d["ClusterStatus"] == "InService":
                return
        raise AssertionError(f"{name} did not settle after someone else's change")

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
        self.emu.advance(1)  # a person's commands are at least a second apart: each its own transition id
        now = self.now()
        transition_id = f"manual-{action}@{now.isoformat()}"
        while any(c.transition_id == transition_id for c in self.commands):  # a stepped clock came back here
            self.emu.advance(1)
            now = self.now()
            transition_id = f"manual-{action}@{now.isoformat()}"
        first = len(self.landed)

        def work() -> Any:
            return engine.act(ref, action, transition_id=transition_id, wait=wait, poll_seconds=30)  # type: ignore[arg-type]

        result = self._run(f"manual-{action}", kill_at, work)
        if result is None:
            return  # died, or one line and exit 1: the other invariants judge what it left behind
        command = Command(which, action, wait, transition_id, result.kind, result.message, first)
        self.commands.append(command)
        self._judge(command)

    def _judge(self, c: Command) -> None:
        """What the CLI would print and exit with matches what reached the cluster. The exit is the one
        the CLI itself computes (``outcomes.manual_exit``): exit 0 is judged by the world, whatever the
        kind, so a change of that mapping that lets a dropped command exit 0 is caught here."""
        assert c.kind in KINDS, f"{c}: a kind the CLI does not expect"
        code = outcomes.manual_exit(c.kind)
        ours = [u for u in self.landed[c.first :] if u.transition == c.transition_id]
        if code == outcomes.EXIT_OK and not ours:
            # Exit 0 with nothing of its own sent: only following one of ours of the same kind already
            # sent, or nothing was needed (the cluster is already where the command wants it).
            record = self._record(c.cluster)
            pending = record.pending if record is not None else None
            followed = (
                pending is not None
                and pending.action == c.action
                and any(u.transition == pending.transition_id for u in self.landed)
            )
            assert followed or self._already(c), f"{c}: exit 0, and nothing it asked for reached the cluster"
            assert c.kind != "sent", f"{c}: said sent, and nothing reached the cluster"
        if code != outcomes.EXIT_OK and c.kind in NOT_SENT:
            assert not ours, f"{c}: said nothing was sent, yet {ours[0]} landed"
            self.unsent[c.transition_id] = c
        if c.kind == "noop":
            assert self._already(c), f"{c}: exit 0, nothing sent, and the cluster is not where it wants"
        if c.action == "start" and c.cluster in self.replaced and c.kind == "refused":
            assert "\n" not in c.message, f"{c}: not one line"

    def _already(self, c: Command) -> bool:
        """The cluster is already where ``c`` wants it: a stop's groups at most what its target keeps, a
        start's at least its recorded sizes (nothing to judge without a record or once replaced)."""
        d = self._describe(c.cluster)
        targets = {g["InstanceGroupName"]: g.get("TargetCount", 0) for g in d["InstanceGroups"]}
        if c.action == "stop":
            keeps = KEPT if c.cluster == NAMES[1] else {}
            return not [g for g, n in targets.items() if n > keeps.get(g, 0)]
        record = self._record(c.cluster)
        if record is None or record.snapshot is None or c.cluster in self.replaced:
            return True
        return not [g for g, s in record.snapshot.sizes.items() if targets.get(g, 0) < s.count]

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

    @rule(which=st.sampled_from(NAMES), on=st.booleans())
    def deep_health_checks_are_switched(self, which: str, on: bool) -> None:
        """Someone turns the cpu group's deep health checks on (new nodes are then checked for 10 to 20
        minutes, and UpdateCluster is refused meanwhile) or off; the counts stay as they are."""
        d = self._describe(which)
        if d["ClusterStatus"] != "InService":
            return
        g = next(g for g in d["InstanceGroups"] if g["InstanceGroupName"] == "cpu")
        keep = ("InstanceGroupName", "InstanceType", "ExecutionRole", "SlurmConfig", "InstanceStorageConfigs")
        spec = {**{k: g[k] for k in keep if k in g}, "InstanceCount": g.get("TargetCount", g["CurrentCount"])}
        if on:
            spec["OnStartDeepHealthChecks"] = ["InstanceStress", "InstanceConnectivity"]
        self.doing = "someone-else"
        try:
            self.emu.backend.dispatch("UpdateCluster", {"ClusterName": which, "InstanceGroups": [spec]})
        except EmulatorError:
            pass  # refused (health checks running): nothing changed
        finally:
            self.doing = "tick"

    @rule(which=st.sampled_from(NAMES))
    def a_group_is_replaced_while_stopped(self, which: str) -> None:
        """While the cluster is stopped, someone deletes its cpu group and adds one of the same name
        running another instance type (at 0): the recorded size of 2 is not this group's."""
        if which in self.replaced or not self._stopped_and_quiet(which):
            return
        cpu = next(g for g in small_request(which)["InstanceGroups"] if g["InstanceGroupName"] == "cpu")
        self.doing = "someone-else"
        try:
            self.emu.backend.dispatch(
                "UpdateCluster", {"ClusterName": which, "InstanceGroups": [], "InstanceGroupsToDelete": ["cpu"]}
            )
            self._until_in_service(which)
            new = {**cpu, "InstanceType": NEW_TYPE, "InstanceCount": 0}
            self.emu.backend.dispatch("UpdateCluster", {"ClusterName": which, "InstanceGroups": [new]})
            self._until_in_service(which)
        finally:
            self.doing = "tick"
        self.replaced[which] = (f"'cpu' was ml.c5.xlarge, now {NEW_TYPE}", self.now())

    @rule(which=st.sampled_from(NAMES), cpu=st.sampled_from([0, 1]))
    def the_cluster_is_recreated_while_stopped(self, which: str, cpu: int) -> None:
        """While the cluster is stopped, someone deletes it and creates another of the same name (a new
        ARN), with its controller and ``cpu`` nodes: nothing recorded is this cluster's."""
        if which in self.replaced or not self._stopped_and_quiet(which):
            return
        self.emu.backend.dispatch("DeleteCluster", {"ClusterName": which})
        self._until_in_service(which, gone=True)
        # Someone else's launch is not the one a drawn capacity fault was meant for: default capacity.
        self.emu.backend.set_capacity(CapacityModel.default())
        self.emu.backend.dispatch("CreateCluster", small_request(which, cpu=cpu))
        self._until_in_service(which)
        self.replaced[which] = (f"now {self._describe(which)['ClusterArn']}", self.now())

    # ---- what must hold -------------------------------------------------------------------------------
    @invariant()
    def every_remembered_size_survives(self) -> None:
        for name in NAMES:
            record = self._record(name)
            if record is not None and record.snapshot is not None:
                # The most that group (of the cluster the snapshot names, running the type it names) had:
                # the sizes created, never one a floor kept, nor another cluster's or group's.
                arn = record.snapshot.cluster_arn
                assert arn is not None, f"{name}: a snapshot that names no cluster"
                for g, size in record.snapshot.sizes.items():
                    had = self.seen.get((arn, g, size.instance_type or ""))
                    assert size.count == had, f"{name}: remembered {g} at {size.count} for {arn}, it had {had}"
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
            if u.doing != "tick" or u.held is not None or (u.transition or "").startswith("manual-"):
                continue  # (a person's command resumed by the tick after its process died is no schedule wish)
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

    @invariant()
    def a_restore_never_lands_on_another_group_or_cluster(self) -> None:
        # A scheduler's update never raises a group (of one cluster ARN, running one instance type) above
        # what that very group ever had: a recorded size only goes back where it was recorded.
        for u in self.landed:
            if u.doing != "someone-else":
                assert not u.strangers, f"{u.cluster}: restored onto what was replaced: {u.strangers} ({u})"

    @invariant()
    def a_command_is_never_dropped(self) -> None:
        # A command that said nothing was sent (and exited non-zero) is never sent later by a tick behind
        # the user's back; one that exited 0 saying it was sent reached the cluster (checked as it ends).
        for u in self.landed:
            said = self.unsent.get(u.transition or "")
            if said is not None and u.doing != f"manual-{said.action}":  # a later command of the same kind may
                raise AssertionError(f"{u.cluster}: {said} said nothing was sent; then {u}")

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
        # The next transition after the latest moment the scheduler has lived (its clock may read earlier:
        # a command it already carried out after the one before stands until then).
        upcoming = schedule.next_transition(max(self.now(), self.lived))
        assert upcoming is not None
        self.emu.advance((upcoming.at - self.now()).total_seconds() + 60)
        engine = self._engine()
        for _ in range(30):
            tick(engine, self.governed, self.now())
            if self._settled(schedule_state(schedule, self.now()).desired):
                self._refuses_a_replaced_restore()
                return
            self.emu.advance(600)
        wanted = schedule_state(schedule, self.now()).desired
        states = {n: (self._targets(n), self._record(n)) for n in NAMES}
        raise AssertionError(f"did not converge to {wanted} after the faults stopped: {states}")

    def _refuses_a_replaced_restore(self) -> None:
        """A cluster whose group or whole self was replaced while stopped, and whose record still holds
        the sizes from before: its start is refused in one line naming the change (not a silent skip)."""
        for name, (change, _when) in self.replaced.items():
            ref = next(g.ref for g in self.governed if g.ref.name == name)
            for _ in range(12):  # an update of its own still settling: the start waits its turn (a skip)
                if not self._from_before(name):
                    break  # stopped again since: what it records now is this cluster's own
                self.emu.advance(1)
                result = self._engine().act(ref, "start", transition_id=f"manual-start@{self.now().isoformat()}")
                if result.kind != "skip":
                    break
                self.emu.advance(600)
                tick(self._engine(), self.governed, self.now())
            else:
                raise AssertionError(f"{name} ({change}): a start was skipped for two hours: {result}")
            if self._from_before(name):
                assert result.kind == "refused", f"{name} ({change}): a start was {result}"
                assert "replaced while stopped" in result.message and change in result.message, result
                assert "\n" not in result.message, result

    def _from_before(self, name: str) -> bool:
        """The record's sizes are from the cluster or the cpu group as they were before the replacement
        (by identity, not by time: the scheduler's clock may have been stepped back since)."""
        record = self._record(name)
        if record is None or record.snapshot is None:
            return False
        d = self._describe(name)
        types = {g["InstanceGroupName"]: g.get("InstanceType") for g in d["InstanceGroups"]}
        cpu = record.snapshot.sizes.get("cpu")
        other_type = cpu is not None and cpu.instance_type != types.get("cpu")
        return record.snapshot.cluster_arn != d["ClusterArn"] or other_type

    def _settled(self, wanted: str) -> bool:
        for name in NAMES:
            if name in self.replaced:
                continue  # its start is refused until the user claims or forgets it (judged above)
            goal = SIZES if wanted == "running" else (KEPT if name == NAMES[1] else ZERO)
            status, targets = self._targets(name)
            record = self._record(name)
            if status != "InService" or targets != goal or record is None or record.pending is not None:
                return False
            d = self.emu.backend.dispatch("DescribeCluster", {"ClusterName": name})
            if any(g["CurrentCount"] != g.get("TargetCount", 0) for g in d["InstanceGroups"]):
                return False
        return True


class DynamoFleet(Fleet):
    """The same world on the DynamoDB store (moto's table, emptied for each example), whose conditional
    writes may be applied with their answers lost: botocore retries and meets its own write."""

    def _open_store(self) -> StateStore:
        clear_table(DYNAMODB_TABLE)
        store = open_dynamodb(DYNAMODB_TABLE)
        self.store_drop: str | None = None  # a write operation, or "any": its next answer is lost
        self.store_lost: list[str] = []
        store._client.meta.events.register_first("before-send.dynamodb", self._lose_store_answer)
        return store

    def _lose_store_answer(self, request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        """botocore takes the first answer a before-send handler gives, but runs every handler: moto's own
        (registered after this one) still applies the write. So: applied, answered 500, retried."""
        operation = event_name.rsplit(".", 1)[-1]
        if operation not in WRITES or self.store_drop not in (operation, "any"):
            return None
        self.store_drop = None
        self.store_lost.append(operation)
        body = b'{"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "lost"}'
        return AWSResponse(request.url, 500, {}, _Raw(body))

    @rule(operation=st.sampled_from([*WRITES, "any"]))
    def the_next_store_answer_is_lost(self, operation: str) -> None:
        self.store_drop = operation

    @rule(
        which=st.sampled_from(NAMES),
        action=st.sampled_from(["stop", "start"]),
        wait=st.booleans(),
        operation=st.sampled_from(WRITES[:2]),
    )
    def a_command_whose_store_answer_is_lost(self, which: str, action: str, wait: bool, operation: str) -> None:
        """A person's command whose next record write (the intent's PutItem, or a record written with its
        history line) is applied with its answer lost: what the command says must match what was sent."""
        self.store_drop = operation
        self.a_manual_command(which, action, wait, None)
        self.store_drop = None


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body

    def read(self, *_: Any) -> bytes:
        body, self._body = self._body, b""
        return body


def _settings(slow: bool, *, dynamodb: bool = False) -> settings:
    # moto answers a store call in about 10 ms of CPU (the memory store in microseconds): fewer draws.
    examples = (60 if slow else 2) if dynamodb else (300 if slow else 15)
    return settings(
        max_examples=examples,
        stateful_step_count=(40 if slow else 12) if dynamodb else (50 if slow else 25),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        derandomize=not slow,  # CI replays the same bounded draw; the long run explores
        database=None,
    )


def test_the_scheduler_survives_a_hostile_world(pytestconfig: pytest.Config) -> None:
    run_state_machine_as_test(Fleet, settings=_settings(run_slow(pytestconfig)))


@pytest.fixture(scope="module")
def dynamodb_table() -> Iterator[None]:
    """One moto table for the module (moto's start and the table cost more than a test): each example
    empties it (``DynamoFleet._open_store``)."""
    with mocked_dynamodb(DYNAMODB_TABLE):
        yield


def test_a_command_after_a_stepped_back_transition_is_not_dated_before_it() -> None:
    """Found by the bounded draw: the 08:00 start ticked, the host's clock back an hour, then a manual
    stop and start of the enforced sm-1 settled and were dated 07:xx, before the transition already
    applied; the next tick took 07:xx for before office hours and stopped sm-1 again (invariant 6)."""
    fleet = Fleet()
    try:
        fleet.the_clock_steps(-1, True)
        fleet.a_manual_command(NAMES[1], "stop", True, None)
        fleet.a_manual_command(NAMES[1], "start", True, None)
        for _ in range(2):
            fleet.a_tick(None)
            fleet.emu.advance(600)
        fleet.a_stepped_clock_never_undoes_a_newer_transition()
        assert fleet._targets(NAMES[1])[1] == SIZES
    finally:
        fleet.stack.close()


def test_the_scheduler_survives_lost_store_answers(pytestconfig: pytest.Config, dynamodb_table: None) -> None:
    run_state_machine_as_test(DynamoFleet, settings=_settings(run_slow(pytestconfig), dynamodb=True))


@pytest.mark.parametrize(("write", "wait"), [("PutItem", False), ("TransactWriteItems", True)])
def test_a_lost_store_answer_is_not_reported_as_nothing_sent(write: str, wait: bool, dynamodb_table: None) -> None:
    """The fixed path the bounded draw may miss (issue 26 case 12): a start's first conditional write
    of that kind (the intent's PutItem; with --wait, the settled record and its line in one transaction)
    is applied, its answer lost, and botocore's retry meets it. The start must say it was sent (or
    settled), and no tick may send it again."""
    fleet = DynamoFleet()
    try:
        for _ in range(3):  # 06:30, before office hours: the first ticks stop both clusters
            fleet.a_tick(None)
            fleet.emu.advance(600)
        assert fleet._targets(NAMES[0])[1] == ZERO
        first = len(fleet.landed)
        fleet.the_next_store_answer_is_lost(write)
        fleet.a_manual_command(NAMES[0], "start", wait, None)  # judged as the CLI would report it
        assert fleet.store_lost == [write]
        assert len(fleet.commands) == 1, "the start raised: exit 1 for a start that went out"
        for _ in range(3):
            fleet.emu.advance(600)
            fleet.a_tick(None)
        fleet.a_command_is_never_dropped()
        fleet.no_transition_is_sent_twice()
        assert fleet.commands[0].kind in SENT, fleet.commands[0]
        assert [u.doing for u in fleet.landed[first:] if u.cluster == NAMES[0]] == ["manual-start"]
        assert fleet._targets(NAMES[0])[1] == SIZES
    finally:
        fleet.stack.close()


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


def test_a_command_that_sends_nothing_after_a_stepped_back_transition_keeps_its_date() -> None:
    """Found by the long Fleet draw: the 08:00 start ticked, the host's clock back an hour, then a manual
    start of the already running, enforced sm-1 (nothing to send). The no-op recorded 07:35 as the
    applied transition, moving it back before 08:00, and the next tick enforced Friday's 18:00 stop.
    No writer moves the applied transition back (``ClusterRecord.applied_from``)."""
    fleet = Fleet()
    try:
        fleet.the_clock_steps(-1, True)
        fleet.a_manual_command(NAMES[1], "start", False, None)
        fleet.a_tick(None)
        fleet.a_stepped_clock_never_undoes_a_newer_transition()
        assert fleet._targets(NAMES[1])[1] == SIZES
    finally:
        fleet.stack.close()


def test_a_resumed_schedule_already_met_is_recorded_before_a_clock_steps_back() -> None:
    """Found by the long Fleet draw (shrunk to five steps): sm-0 held running, released at 06:30, the
    08:00 start ticked with the cluster already running (nothing sent, nothing recorded), then the
    host's clock back an hour: the 07:35 tick took Friday's 18:00 stop for the resumed schedule's wish
    and stopped a cluster office hours want running. The first tick that finds a resumed schedule
    already met now looks once and records the transition it lived through."""
    fleet = Fleet()
    try:
        fleet.a_hold(NAMES[0], "running", None)
        fleet.a_tick(None)
        fleet.a_release(NAMES[0])
        fleet.the_clock_steps(-1, True)
        fleet.a_tick(None)
        fleet.a_stepped_clock_never_undoes_a_newer_transition()
        assert fleet._targets(NAMES[0])[1] == SIZES
    finally:
        fleet.stack.close()


def test_a_release_then_a_clock_stepped_back_behind_it_does_not_act_on_the_past() -> None:
    """Found by the long DynamoFleet draw: sm-0 held running through the evening's stop, released at
    08:35 the next morning, then the host's clock went back an hour. The release had cleared
    ``applied_transition_at`` (the schedule resumes), so the stepped-back guard saw nothing and the
    07:35 tick took yesterday's 18:00 stop for due: it stopped a cluster office hours want running.
    The record now remembers when the schedule was resumed, and nothing is decided from before it."""
    fleet = Fleet()
    try:
        fleet.a_hold(NAMES[0], "running", None)
        fleet.the_clock_steps(1, True)  # the 08:00 start, then the host an hour ahead
        fleet.emu.advance(12 * 3600)  # through the 18:00 stop: held running, nothing sent
        fleet.a_tick(None)
        fleet.emu.advance(12 * 3600)  # 08:35 the next morning (the host reads 09:35)
        fleet.the_clock_steps(-1, False)  # the host's clock right again
        fleet.a_release(NAMES[0])
        fleet.the_clock_steps(-1, False)  # and an hour behind
        _status, before = fleet._targets(NAMES[0])
        assert before == SIZES, before
        fleet.a_tick(None)
        fleet.a_stepped_clock_never_undoes_a_newer_transition()
        assert fleet._targets(NAMES[0])[1] == SIZES
    finally:
        fleet.stack.close()


def _stopped_by_the_first_ticks(fleet: Fleet) -> None:
    for _ in range(3):  # 06:30, before office hours: the first ticks stop both clusters
        fleet.a_tick(None)
        fleet.emu.advance(600)
    assert fleet._stopped_and_quiet(NAMES[0]) and fleet._stopped_and_quiet(NAMES[1])


def test_a_start_onto_a_replaced_group_or_cluster_is_refused_naming_it() -> None:
    """The replacement rules on a fixed path: sm-0's cpu group is replaced by a c5.2xlarge group and
    sm-1 is deleted and created again while both are stopped; the 08:00 tick restores neither (without
    planner.replaced, the restore invariant fails) and a start is refused in one line naming the change."""
    fleet = Fleet()
    try:
        _stopped_by_the_first_ticks(fleet)
        fleet.a_group_is_replaced_while_stopped(NAMES[0])
        fleet.the_cluster_is_recreated_while_stopped(NAMES[1], 0)
        assert set(fleet.replaced) == set(NAMES)
        fleet.emu.advance((datetime(2026, 11, 30, 8, 5, tzinfo=MONDAY_6AM.tzinfo) - fleet.now()).total_seconds())
        for _ in range(3):
            fleet.a_tick(None)
            fleet.a_restore_never_lands_on_another_group_or_cluster()
            fleet.every_remembered_size_survives()
            fleet.emu.advance(600)
        for name in NAMES:
            fleet.a_manual_command(name, "start", False, None)
            assert fleet.commands[-1].kind == "refused", fleet.commands[-1]
        fleet._refuses_a_replaced_restore()
    finally:
        fleet.stack.close()


@pytest.mark.parametrize(("name", "cpu"), [(NAMES[0], 0), (NAMES[1], 1)])
def test_a_stop_of_a_recreated_cluster_records_its_own_sizes(name: str, cpu: int) -> None:
    """Found by the bounded draw once it could re-create clusters: sm-1 deleted and created again with
    1 cpu node (its floor) while stopped, then stopped: the stop took the node for its own floor and
    carried the old cluster's cpu size (2) into a snapshot stamped with the new ARN, so the next start
    would restore 2 onto a cluster that never had them. The same for sm-0 re-created with none."""
    fleet = Fleet()
    try:
        _stopped_by_the_first_ticks(fleet)
        fleet.the_cluster_is_recreated_while_stopped(name, cpu)
        fleet.a_manual_command(name, "stop", True, None)
        fleet.every_remembered_size_survives()
        record = fleet._record(name)
        assert record is not None and record.snapshot is not None
        assert {g: s.count for g, s in record.snapshot.sizes.items()} == {"controller": 1, "cpu": cpu}
        fleet.a_manual_command(name, "start", True, None)
        fleet.a_restore_never_lands_on_another_group_or_cluster()
        assert fleet._targets(name)[1] == {"controller": 1, "cpu": cpu}
    finally:
        fleet.stack.close()


def test_a_start_followed_after_the_clock_stepped_back_settles() -> None:
    """Found by the bounded draw once the new rules changed it: a start sent, the host's clock stepped
    back an hour, and the start followed to its end measured a negative duration, which the record
    refused (a traceback instead of the settled line)."""
    fleet = Fleet()
    try:
        _stopped_by_the_first_ticks(fleet)
        fleet.a_manual_command(NAMES[0], "start", False, None)
        fleet.the_clock_steps(-1, False)
        fleet.emu.advance(1800)
        fleet.a_manual_command(NAMES[0], "start", True, None)  # follows the start in flight to its end
        record = fleet._record(NAMES[0])
        assert record is not None and record.pending is None and record.applied_state == "running"
        assert all(d >= 0 for d in record.start_durations_s)
    finally:
        fleet.stack.close()


def test_a_start_behind_a_settling_stop_is_not_reported_sent() -> None:
    """The never-dropped invariant on a fixed path (issue 26 case 13): a start while the stop it
    follows is still settling is not sent; it must not exit 0 as the stop's progress, and no tick
    sends it later."""
    fleet = Fleet()
    try:
        fleet.a_manual_command(NAMES[0], "stop", False, None)
        fleet.a_manual_command(NAMES[0], "start", False, None)  # the stop is still going down
        assert fleet.commands[-1].kind in NOT_SENT, fleet.commands[-1]
        for _ in range(3):
            fleet.emu.advance(600)
            fleet.a_tick(None)
            fleet.a_command_is_never_dropped()
    finally:
        fleet.stack.close()


def test_a_command_behind_an_unsent_intent_and_someone_elses_update_is_not_reported_sent() -> None:
    """Found by the bounded draw: a stop killed after storing its intent, someone else's update, and a
    new stop: it said "in-progress" (exit 0) for the earlier intent waiting on that update, and was never
    sent. It is a skip (exit 3) that says this stop was not sent."""
    fleet = Fleet()
    try:
        fleet.emu.advance(3 * 3600)  # 09:00: office hours, both running
        fleet.a_manual_command(NAMES[0], "stop", False, "after-intent")  # dies with its intent stored
        fleet.emu.advance(LEASE_S + 1)  # the dead runner's lease lapses
        fleet.someone_else_updates_the_cluster(NAMES[0])  # and someone else's update runs
        fleet.a_manual_command(NAMES[0], "stop", False, None)
        assert fleet.commands[-1].kind in NOT_SENT, fleet.commands[-1]
        assert "was not sent" in fleet.commands[-1].message
    finally:
        fleet.stack.close()


def test_the_never_dropped_verdict_follows_the_products_exit_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rig judges a command by the exit the CLI computes (``app.outcomes.manual_exit``), not by a
    copy of it: the same start behind a settling stop passes under the product's mapping (exit 3), and
    the never-dropped invariant fails the moment that mapping would let it exit 0."""
    fleet = Fleet()
    try:
        fleet.a_manual_command(NAMES[0], "stop", False, None)
        fleet.a_manual_command(NAMES[0], "start", False, None)  # the stop still going down: not sent
        start = fleet.commands[-1]
        assert outcomes.manual_exit(start.kind) == outcomes.EXIT_NOT_READY, start
        monkeypatch.setattr(outcomes, "manual_exit", lambda kind: outcomes.EXIT_OK)  # a mapping gone wrong
        with pytest.raises(AssertionError, match="exit 0, and nothing it asked for reached the cluster"):
            fleet._judge(start)
    finally:
        fleet.stack.close()
