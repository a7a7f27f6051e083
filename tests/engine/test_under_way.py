"""A manual stop or start that lands on an update of its own kind already under way, through the CLI in
process against an emulator on a fast real-time clock (answered in process, not over the socket):
``--wait`` follows that update to its end and exits as a fresh ``--wait`` would (0 settled, 1 with its
line on failure), saying it follows the update already under way; without ``--wait`` nothing new is
sent and the line names the update under way (exit 3)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.store.records import PendingAction
from hyperpod_scheduler.store.sqlite import SqliteStore
from tests.engine.conftest import three_tier_request
from tests.reliability.cli_inproc import Ran, cli
from tests.sessions import shared_session


@dataclass
class Live:
    emu: Emulator
    tmp: Path
    updates: list[dict[str, int]]  # every UpdateCluster that reached the cluster: its groups' counts

    def run(self, *argv: str) -> Ran:
        return cli(*argv, "-c", str(self.tmp / "config.yaml"), "--state", str(self.tmp / "state.sqlite"))

    def starts(self) -> int:
        return sum(1 for u in self.updates if any(u.values()))


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Live]:
    # A fast real-time clock: --wait polls for real, and a 10-minute provisioning takes a fraction of a second.
    with running_emulator(speed=3000, seed=5, in_process=True) as emu:
        for var in ("AWS_PROFILE", "AWS_CONFIG_FILE", "HYPERPOD_SCHEDULER_CONFIG"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", emu.endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        (tmp_path / "config.yaml").write_text(
            "defaults: {poll_seconds: 0.05, schedule: office}\n"
            "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
            "targets: [{region: us-east-1, clusters: [c1]}]\n"
        )
        client = shared_session().client("sagemaker", endpoint_url=emu.endpoint)
        client.create_cluster(**three_tier_request())
        for _ in range(400):
            d = client.describe_cluster(ClusterName="c1")
            if d["ClusterStatus"] == "InService" and all(
                g["CurrentCount"] == g["TargetCount"] for g in d["InstanceGroups"]
            ):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("c1 never came up")
        updates: list[dict[str, int]] = []
        original = emu.backend.dispatch

        def dispatch(operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
            if operation == "UpdateCluster":
                updates.append({g["InstanceGroupName"]: g["InstanceCount"] for g in params["InstanceGroups"]})
            return original(operation, params, **kw)

        emu.backend.dispatch = dispatch  # type: ignore[method-assign]
        yield Live(emu, tmp_path, updates)


def _stopped(live: Live) -> None:
    stopped = live.run("stop", "c1", "--wait")
    assert stopped.code == 0 and "stop settled" in stopped.out, stopped


def test_start_wait_on_a_start_under_way_follows_it_to_its_end(live: Live) -> None:
    _stopped(live)
    first = live.run("start", "c1")
    assert first.code == 0 and "start sent" in first.out, first
    followed = live.run("start", "c1", "--wait")
    assert followed.code == 0, followed
    assert "a start is already under way (manual-start@" in followed.out, followed.out
    assert "following it to its end" in followed.out and "start settled" in followed.out, followed.out
    assert live.starts() == 1  # nothing new was sent: the start under way was the wish


def test_start_wait_json_answers_with_the_start_it_followed(live: Live) -> None:
    _stopped(live)
    assert live.run("start", "c1").code == 0
    followed = live.run("start", "c1", "--wait", "--json")
    assert followed.code == 0, followed
    answer = json.loads(followed.out)
    assert answer["kind"] == "settled", answer  # not "noop: already at the recorded sizes"
    assert answer["message"].startswith("followed the start already under way (manual-start@"), answer


def test_start_wait_on_a_failing_start_under_way_exits_1_with_its_line(live: Live) -> None:
    _stopped(live)
    calm = live.emu.backend.capacity
    live.emu.backend.set_capacity(replace(calm, fail_next_launches={"ml.trn1.32xlarge": 100}))
    assert live.run("start", "c1").code == 0
    followed = live.run("start", "c1", "--wait")
    assert followed.code == 1, followed
    assert live.starts() == 1  # a fresh start --wait would have failed once: no second start behind it
    assert "already under way (manual-start@" in followed.out, followed.out
    assert "failed start did not settle" in followed.out and "retry 1 is due" in followed.out, followed.out


def test_start_without_wait_on_a_start_under_way_says_so_and_sends_nothing(live: Live) -> None:
    _stopped(live)
    live.emu.clock.pause()  # the start stays in flight for as long as this test needs
    try:
        assert live.run("start", "c1").code == 0
        again = live.run("start", "c1")
    finally:
        live.emu.clock.resume()
    assert again.code == 3, again
    assert "nothing sent: a start is already under way (manual-start@" in again.err, again.err
    assert "this start was not sent; add --wait to wait for it" in again.err, again.err
    assert live.starts() == 1


def test_stop_wait_on_a_stop_under_way_follows_it_to_its_end(live: Live) -> None:
    assert live.run("stop", "c1").code == 0
    followed = live.run("stop", "c1", "--wait")
    assert followed.code == 0, followed
    assert "a stop is already under way (manual-stop@" in followed.out, followed.out
    assert "stop settled" in followed.out, followed.out
    assert len(live.updates) == 1


def test_stop_without_wait_on_a_stop_under_way_says_so(live: Live) -> None:
    live.emu.clock.pause()
    try:
        assert live.run("stop", "c1").code == 0
        again = live.run("stop", "c1")
    finally:
        live.emu.clock.resume()
    assert again.code == 3, again
    assert "nothing sent: a stop is already under way (manual-stop@" in again.err, again.err
    assert len(live.updates) == 1


def test_start_wait_behind_an_intent_and_someone_elses_update_waits_for_it(live: Live) -> None:
    """An intent stored but never marked sent (a runner died before its UpdateCluster) and someone else's
    update running: ``start --wait`` waits for that update to settle, then the engine finds the intent
    never went out and sends the start; it used to answer "not sent" with exit 3 at once, --wait or not."""
    _stopped(live)
    with SqliteStore(live.tmp / "state.sqlite") as store:
        (key,) = [k for k in store.list_keys() if k.endswith("c1")]
        record = store.get(key)
        assert record is not None and record.pending is None
        now = datetime.now(UTC)
        intent = PendingAction(
            transition_id=f"manual-start@{now.isoformat()}",
            action="start",
            phase="intent",
            request_digest="never sent",
            created_at=now,
            updated_at=now,
            targets={"controller": 1, "dev": 2, "train": 3},
            origin="manual",
        )
        store.put(record.evolve(pending=intent, updated_at=now), expected_version=record.version)
    live.emu.clock.pause()  # someone else's update stays in flight until the timer below
    d = live.emu.backend.dispatch("DescribeCluster", {"ClusterName": "c1"})
    g = d["InstanceGroups"][0]
    keep = ("InstanceGroupName", "InstanceType", "ExecutionRole", "SlurmConfig", "InstanceStorageConfigs")
    same = {**{k: g[k] for k in keep if k in g}, "InstanceCount": g.get("TargetCount", g["CurrentCount"])}
    live.emu.backend.dispatch("UpdateCluster", {"ClusterName": "c1", "InstanceGroups": [same]})
    resume = threading.Timer(2.0, live.emu.clock.resume)
    resume.start()
    try:
        started = live.run("start", "c1", "--wait")
    finally:
        resume.cancel()
        live.emu.clock.resume()
    assert started.code == 0, started
    assert "waiting before the start: cluster is Updating" in started.out, started.out
    assert "start settled" in started.out, started.out
    assert live.starts() == 1


def test_start_wait_while_another_runner_follows_the_start_waits_past_one_lease_ttl(live: Live) -> None:
    """Another runner (a first ``start --wait`` in another terminal) holds the lease while it follows
    the start under way, for longer than one lease TTL (a start takes longer than 15 minutes): a second
    ``start --wait`` keeps waiting while that start is in flight, rather than give up after one TTL with
    exit 3 while the start it asked for is still coming up."""
    config = live.tmp / "config.yaml"
    config.write_text(config.read_text().replace("poll_seconds: 0.05", "poll_seconds: 0.05, lease_ttl_seconds: 2"))
    _stopped(live)
    live.emu.clock.pause()  # the start stays in flight while the other runner "follows" it
    assert live.run("start", "c1").code == 0
    with SqliteStore(live.tmp / "state.sqlite") as store:
        (key,) = [k for k in store.list_keys() if k.endswith("c1")]
        done = threading.Event()

        def other_runner() -> None:  # renews its lease each 0.2 s for 5 s, then the start settles and it goes
            while not done.wait(0.2):
                store.renew_lease(key, "another-terminal", 2.0, datetime.now(UTC))
            live.emu.clock.resume()
            store.release_lease(key, "another-terminal")

        assert store.acquire_lease(key, "another-terminal", 2.0, datetime.now(UTC))
        other = threading.Thread(target=other_runner)
        other.start()
        stop = threading.Timer(5.0, done.set)  # two and a half lease TTLs
        stop.start()
        try:
            followed = live.run("start", "c1", "--wait")
        finally:
            stop.cancel()
            done.set()
            other.join()
            live.emu.clock.resume()
    assert followed.code == 0, followed
    assert "another runner follows the start under way (manual-start@" in followed.out, followed.out
    assert "start settled" in followed.out, followed.out
    assert live.starts() == 1


def test_stop_include_protected_wait_behind_a_stop_under_way_still_releases_what_it_kept(live: Live) -> None:
    """The stop under way keeps train at its floor; ``stop --include-protected --wait`` follows it to
    its end and then sends what that stop kept: following an update of the same kind never drops what
    more the command asks for."""
    (live.tmp / "config.yaml").write_text(
        "defaults: {poll_seconds: 0.05, schedule: office}\n"
        "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
        "targets:\n"
        "  - region: us-east-1\n"
        "    clusters: [{name: c1, policy: {groups: {train: {floor: 1}}}}]\n"
    )
    assert live.run("stop", "c1").code == 0
    assert live.updates[-1]["train"] == 1
    released = live.run("stop", "c1", "--include-protected", "--wait")
    assert released.code == 0, released
    assert "a stop is already under way (manual-stop@" in released.out, released.out
    assert len(live.updates) == 2 and live.updates[-1]["train"] == 0, live.updates
