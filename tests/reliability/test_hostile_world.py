"""Issue 17's sequences, each reproduced end to end as a user meets it (the CLI against a served
emulator), so every one of them would have failed before its fix.

1. two accounts, one name · 2. `start` stops the cluster · 3. one bad answer stops the fleet ·
4. an update applied but unacknowledged · 5. `run` follows its config · 6. settings that cannot work ·
7. an unsent intent mistaken for someone else's update · 8. a truncated state file.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hyperpod_scheduler.emulator.errors import EmulatorError
from hyperpod_scheduler.engine.crashpoints import ENV
from hyperpod_scheduler.store.sqlite import SqliteStore
from tests.engine.conftest import three_tier_request
from tests.reliability.crash_setup import RECOVER_AFTER, Live, live_cluster
from tests.reliability.harness import (
    SIZES,
    STOPPED,
    account_emulator,
    at_sizes,
    cli_env,
    cli_here,
    counts,
    record,
    recorded_sizes,
    run_cli,
    small_request,
    spawn_cli,
    wait_for,
)


@pytest.fixture
def stop_live(tmp_path: Path) -> Iterator[Live]:
    yield from live_cluster(tmp_path, "stop")


@pytest.fixture
def start_live(tmp_path: Path) -> Iterator[Live]:
    yield from live_cluster(tmp_path, "start")  # stopped by the schedule now, running from start_at


def _killed(live: Live, *command: str) -> None:
    """``command`` run as the real CLI and SIGKILLed right after its intent was stored."""
    child = run_cli(live.args(*command), {**live.env, ENV: "after-intent"}, live.tmp)
    assert child.returncode == -9, f"never reached after-intent: {child.stdout}{child.stderr}"


def _targets(live: Live) -> dict[str, int]:
    return {n: t for n, (_c, t) in counts(live.emu, "c1")[1].items()}


# ---- 8. a store that is never silently empty -------------------------------------------------------


def test_a_state_file_truncated_to_zero_bytes_is_an_error_not_a_forgotten_fleet(stop_live: Live) -> None:
    live = stop_live
    code, out = live.cli("stop", "c1", "--wait")
    assert code == 0, out
    assert recorded_sizes(live.state) == SIZES
    live.state.write_bytes(b"")
    for command, ran in ((("status",), run_cli), (("start", "c1"), cli_here), (("tick",), cli_here)):
        done = ran(live.args(*command), live.env, live.tmp)  # status: the real console script's exit and stderr
        assert done.returncode != 0, f"{command}: {done.stdout}"
        assert str(live.state) in done.stderr and "empty" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "nothing recorded" not in done.stdout
    assert live.state.stat().st_size == 0


# ---- 6. settings that cannot work are refused ------------------------------------------------------


def test_a_lease_no_longer_than_the_poll_is_refused_before_anything_is_sent(stop_live: Live) -> None:
    live = stop_live
    live.config.write_text(
        "defaults: {poll_seconds: 0.05, lease_ttl_seconds: 0.05}\n"
        "targets: [{region: us-east-1, schedule: never, clusters: [c1]}]\n"
    )
    # Before: --wait gave up after its first poll ("another runner follows it now") and exited 0
    # while the cluster was still Updating.
    done = cli_here(live.args("stop", "c1", "--wait"), live.env, live.tmp)
    assert done.returncode != 0, done.stdout
    assert "lease_ttl_seconds (0.05)" in done.stderr and "poll_seconds (0.05)" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert live.tally.sent["c1"] == 0


# ---- 4. an update applied but answered 500 --------------------------------------------------------


def _outcomes(state: Path) -> list[tuple[str, str]]:
    with SqliteStore(state) as store:
        return [(e.action, e.outcome) for key in store.list_keys() for e in store.history(key)]


def test_an_update_applied_but_answered_500_is_followed_not_recorded_as_refused(stop_live: Live) -> None:
    live = stop_live
    original = live.emu.backend.dispatch
    lost: list[str] = []

    def dispatch(operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        result = original(operation, params, **kw)
        if operation == "UpdateCluster" and not lost:
            lost.append(operation)  # applied by the model; the answer is a 500
            raise EmulatorError("InternalFailure", "We encountered an internal error. Please try again.", 500)
        return result

    live.emu.backend.dispatch = dispatch  # type: ignore[method-assign]
    done = cli_here(live.args("stop", "c1", "--wait"), live.env, live.tmp)
    assert lost, "the fault never fired"
    # Before: botocore retried, the retry met ConflictException and the stop was recorded "refused"
    # while it was in flight.
    assert live.tally.sent["c1"] == 1, f"UpdateCluster reached the cluster {live.tally.sent['c1']} times"
    assert ("stop", "refused") not in _outcomes(live.state), done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    wait_for(lambda: at_sizes(live.emu, "c1", STOPPED), "c1 stopped")
    assert ("stop", "ok") in _outcomes(live.state)
    assert recorded_sizes(live.state) == SIZES


# ---- 2. a manual start never sends a stop -----------------------------------------------------------


def test_start_after_a_stop_killed_before_it_went_out_never_sends_that_stop(stop_live: Live) -> None:
    live = stop_live
    live.config.write_text(
        "defaults: {poll_seconds: 0.05, lease_ttl_seconds: 1}\n"
        "targets: [{region: us-east-1, schedule: never, clusters: [c1]}]\n"
    )
    _killed(live, "stop", "c1", "--wait")
    wait_for(lambda: live.tally.sent["c1"] == 0 and at_sizes(live.emu, "c1", SIZES), "c1 untouched", tries=5)
    import time

    time.sleep(1.2)  # the dead runner's lease lapses
    code, out = live.cli("start", "c1", "--wait")
    assert code == 0, out
    # Before: the stale stop was sent first (terminating the instances), then the start skipped "Updating".
    assert live.tally.sent["c1"] == 0, "start sent an UpdateCluster: the stale stop"
    assert _targets(live) == SIZES
    assert ("stop", "withdrawn") in _outcomes(live.state)


def test_the_morning_tick_withdraws_last_nights_unsent_stop(start_live: Live) -> None:
    live = start_live
    night = live.start_at - timedelta(hours=1)
    _killed(live, "tick", "--at", night.isoformat())
    code, out = live.cli("tick", "--at", (live.start_at + RECOVER_AFTER).isoformat())  # morning, lease lapsed
    assert code == 0, out
    assert live.tally.sent["c1"] == 0, "the morning tick sent last night's stop"
    assert _targets(live) == SIZES
    assert ("stop", "withdrawn") in _outcomes(live.state)
    assert recorded_sizes(live.state) == SIZES


# ---- 7. an unsent intent is not someone else's update --------------------------------------------


def _resize_by_hand(live: Live, group: str, count: int) -> None:
    d = live.emu.backend.dispatch("DescribeCluster", {"ClusterName": "c1"})
    g = next(g for g in d["InstanceGroups"] if g["InstanceGroupName"] == group)
    keep = ("InstanceGroupName", "InstanceType", "ExecutionRole", "SlurmConfig", "InstanceStorageConfigs")
    same = {k: g[k] for k in keep if k in g}
    if "LifeCycleConfig" in g:
        same["LifeCycleConfig"] = g["LifeCycleConfig"]
    live.emu.backend.dispatch(
        "UpdateCluster", {"ClusterName": "c1", "InstanceGroups": [{**same, "InstanceCount": count}]}
    )


def test_someone_elses_update_is_waited_for_then_the_stop_is_planned_again(stop_live: Live) -> None:
    live = stop_live
    now = datetime.now(UTC)
    _killed(live, "tick", "--at", now.isoformat())
    later = now + RECOVER_AFTER
    with live.emu.paused():
        _resize_by_hand(live, "dev", 4)  # the cluster is Updating, and not because of us
        live.tally.reset()
        code, out = live.cli("tick", "--at", later.isoformat())
        assert code == 0, out
        assert live.tally.sent["c1"] == 0
        rec = record(live.state)
        assert rec is not None and rec.pending is not None and rec.applied_state != "stopped", (
            "the stop was taken to have gone out while someone else's update ran"
        )
    wait_for(lambda: at_sizes(live.emu, "c1", {**SIZES, "dev": 4}), "the hand resize settled")
    live.converge(STOPPED, later)
    assert live.tally.sent["c1"] == 1
    assert recorded_sizes(live.state) == {**SIZES, "dev": 4}  # what the user left it at


# ---- issue 12: release while a hold's stop is in flight ----------------------------------------------


def test_release_while_a_holds_stop_is_in_flight_gives_the_cluster_back_to_the_schedule(start_live: Live) -> None:
    live = start_live
    office = live.start_at + timedelta(hours=1)  # the schedule wants it running
    code, out = live.cli("tick", "--at", office.isoformat())
    assert code == 0, out
    code, out = live.cli("hold", "c1", "--state-wanted", "stopped")
    assert code == 0, out
    with live.emu.paused():
        code, out = live.cli("tick", "--at", (office + timedelta(minutes=1)).isoformat())
        assert code == 0 and live.tally.sent["c1"] == 1, out  # the hold's stop is in flight
        code, out = live.cli("release", "c1")
        assert code == 0, out
    live.converge(SIZES, office + timedelta(minutes=2))
    assert live.tally.sent["c1"] == 2  # the hold's stop, then the schedule's start
    assert recorded_sizes(live.state) == SIZES


# ---- 3. one bad cluster, target or record never stops the others ----------------------------------


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Live]:
    """c0 and c1 under one schedule that wants them stopped, handled one at a time (concurrency 1)."""
    for live in live_cluster(tmp_path, "stop"):
        live.emu.backend.dispatch("CreateCluster", three_tier_request("c0"))
        emu = live.emu
        wait_for(lambda: at_sizes(emu, "c0", SIZES), "c0 in service")  # noqa: B023 (used at once)
        live.config.write_text(
            "defaults: {poll_seconds: 0.05, concurrency: 1}\n"
            "targets: [{region: us-east-1, schedule: never, clusters: [c0, c1]}]\n"
        )
        yield live


def _garbled(live: Live, name: str) -> None:
    """DescribeCluster of ``name`` answers InstanceGroups as an object: botocore's parser itself fails."""
    original = live.emu.backend.dispatch

    def dispatch(operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        result = original(operation, params, **kw)
        if operation == "DescribeCluster" and params.get("ClusterName") == name:
            result = {**result, "InstanceGroups": {g["InstanceGroupName"]: g for g in result["InstanceGroups"]}}
        return result

    live.emu.backend.dispatch = dispatch  # type: ignore[method-assign]


def test_an_answer_botocore_cannot_parse_is_that_clusters_error_and_the_tick_goes_on(pair: Live) -> None:
    live = pair
    _garbled(live, "c0")
    done = cli_here(live.args("tick"), live.env, live.tmp)
    assert live.tally.sent["c1"] == 1, f"the cluster after the bad one was never looked at: {done.stderr}"
    assert done.returncode == 1  # a cluster failed: cron sees it
    assert "c0" in done.stdout and "error" in done.stdout, done.stdout
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr


def test_a_damaged_record_is_that_clusters_error_and_run_goes_on(pair: Live) -> None:
    live = pair
    code, out = live.cli("stop", "c0", "--wait")  # c0 gets a record, then it is damaged by hand
    assert code == 0, out
    with SqliteStore(live.state) as store:
        keys = [k for k in store.list_keys() if k.endswith("/c0")]
    import sqlite3

    with sqlite3.connect(live.state) as conn:
        conn.execute("UPDATE records SET body = '{\"key\": 1' WHERE key = ?", (keys[0],))
    done = cli_here(live.args("run", "--ticks", "2", "--interval", "0.01"), live.env, live.tmp)
    assert done.returncode == 0, done.stderr
    assert live.tally.sent["c1"] == 1, f"run stopped at the damaged record: {done.stderr}"
    assert "unreadable" in done.stdout + done.stderr and keys[0] in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_a_target_whose_discovery_is_denied_is_reported_and_the_others_go_on(pair: Live) -> None:
    live = pair
    live.config.write_text(
        "defaults: {poll_seconds: 0.05, concurrency: 1}\n"
        "targets:\n"
        "  - {region: us-east-1, schedule: never, tag_selector: true}\n"
        "  - {region: us-east-1, profile: nobody, schedule: never, clusters: [c0]}\n"
        "  - {region: us-east-1, schedule: never, clusters: [c1]}\n"
    )
    original = live.emu.backend.dispatch

    def dispatch(operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if operation == "ListClusters":
            raise EmulatorError("AccessDeniedException", "not authorized to perform sagemaker:ListClusters", 400)
        return original(operation, params, **kw)

    live.emu.backend.dispatch = dispatch  # type: ignore[method-assign]
    done = cli_here(live.args("tick"), live.env, live.tmp)
    assert live.tally.sent["c1"] == 1, done.stdout + done.stderr
    assert "targets[0]" in done.stderr and "AccessDenied" in done.stderr, done.stderr
    assert "c0" in done.stdout and "nobody" in done.stdout, done.stdout  # a profile that does not exist
    assert done.returncode == 1
    assert "Traceback" not in done.stderr


# ---- 5. run follows its config ------------------------------------------------------------------------


def test_run_follows_edits_of_its_config_and_keeps_the_last_good_one(stop_live: Live) -> None:
    import signal

    live = stop_live
    head = "defaults: {poll_seconds: 0.05}\n"
    live.config.write_text(head + "targets: [{region: us-east-1, schedule: always, clusters: [c1]}]\n")
    child = spawn_cli(live.args("run", "--interval", "0.1"), live.env, live.tmp)
    try:
        wait_for(lambda: record(live.state) is not None, "the first pass looked at c1", tries=600, pause=0.05)
        assert live.tally.sent["c1"] == 0  # running, as "always" wants
        # Edited while run is running (by hand, or saved from the dashboard's grid).
        live.config.write_text(
            head + "targets: [{region: us-east-1, schedule: never, enforced: true, clusters: [c1]}]\n"
        )
        wait_for(lambda: at_sizes(live.emu, "c1", STOPPED), "run applied the edited schedule", tries=600, pause=0.05)
        live.config.write_text(head + "targets: [{region: us-east-1, schedule: never, clusterz: [c1]}]\n")
        bare = live.tmp / "bare.yaml"
        bare.write_text("targets: []\n")
        # --wait: run (polling every 0.05 s) holds the lease most of the time; without it the start by hand
        # is refused with "another runner holds this cluster's lease" whenever it lands inside a pass.
        by_hand = cli_here(
            ["start", "c1", "--wait", "--config", str(bare), "--state", str(live.state)], live.env, live.tmp
        )
        assert by_hand.returncode == 0, by_hand.stdout + by_hand.stderr  # someone starts it by hand
        # The broken edit is not in force: the last good config (enforced "never") stops it again.
        wait_for(
            lambda: live.tally.sent["c1"] == 3 and at_sizes(live.emu, "c1", STOPPED),
            "enforced again",
            tries=600,
            pause=0.05,
        )
    finally:
        child.send_signal(signal.SIGTERM)
        _out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err  # a signal ends run cleanly
    assert "clusterz" in err and "keeping the last good config" in err, err
    assert "Traceback" not in err


# ---- 1. two accounts, one name -----------------------------------------------------------------------

PROD, DEV = "111111111111", "222222222222"


@pytest.fixture
def two_accounts(tmp_path: Path) -> Iterator[tuple[dict[str, str], dict[str, Any]]]:
    """Profiles prod and dev reach two accounts, each with a cluster ``train`` in us-east-1 (8 and 2 workers)."""
    with (
        account_emulator(PROD, speed=3000, seed=1) as prod,
        account_emulator(DEV, speed=3000, seed=2) as dev,
    ):
        emus = {"prod": prod, "dev": dev}
        for profile, workers in (("prod", 8), ("dev", 2)):
            emus[profile].backend.dispatch("CreateCluster", small_request("train", cpu=workers))
        for profile, workers in (("prod", 8), ("dev", 2)):
            wait_for(lambda e=emus[profile], w=workers: at_sizes(e, "train", {"controller": 1, "cpu": w}), "up")
        (tmp_path / "aws-config").write_text(
            "".join(f"[profile {p}]\nregion = us-east-1\nendpoint_url = {e.endpoint}\n" for p, e in emus.items())
        )
        (tmp_path / "aws-credentials").write_text(
            "".join(f"[{p}]\naws_access_key_id = {p}\naws_secret_access_key = x\n" for p in emus)
        )
        env = cli_env(prod, tmp_path)
        for name in ("AWS_ENDPOINT_URL_SAGEMAKER", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
            env.pop(name)
        env["AWS_CONFIG_FILE"] = str(tmp_path / "aws-config")
        env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "aws-credentials")
        yield env, emus


def test_two_accounts_with_one_cluster_name_keep_their_own_sizes(
    two_accounts: tuple[dict[str, str], dict[str, Any]], tmp_path: Path
) -> None:
    env, emus = two_accounts
    state = str(tmp_path / "state.sqlite")
    (tmp_path / "none.yaml").write_text("defaults: {poll_seconds: 0.05}\n")

    def cli(*args: str) -> None:
        done = cli_here([*args, "--state", state, "--config", str(tmp_path / "none.yaml")], env, tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr

    cli("stop", "train", "--profile", "prod", "--wait")
    cli("stop", "train", "--profile", "dev", "--wait")
    cli("start", "train", "--profile", "prod", "--wait")
    # Before: both shared the record default/us-east-1/train, and prod came back with dev's 2 workers.
    assert at_sizes(emus["prod"], "train", {"controller": 1, "cpu": 8})
    assert at_sizes(emus["dev"], "train", {"controller": 0, "cpu": 0})
    with SqliteStore(state) as store:
        keys = store.list_keys()
    assert keys == [f"{PROD}/us-east-1/train", f"{DEV}/us-east-1/train"]
    cli("start", "train", "--profile", "dev", "--wait")
    assert at_sizes(emus["dev"], "train", {"controller": 1, "cpu": 2})
    done = cli_here(["claim", "train", "--profile", "dev", "--state", state], env, tmp_path)
    assert done.returncode == 0 and DEV in done.stdout, done.stdout + done.stderr
