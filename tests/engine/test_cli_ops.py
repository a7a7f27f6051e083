"""The scheduler commands as a user runs them: against the emulator, through the standard AWS variables."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.errors import UsageError
from tests.engine.conftest import three_tier_request
from tests.sessions import shared_session

runner = CliRunner()


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[Emulator, Path]]:
    # A fast real-time clock: --wait polls for real, and a 10-minute provisioning takes a fraction of a second.
    with running_emulator(speed=3000, seed=5, in_process=True) as emu:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", emu.endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.chdir(tmp_path)
        config = tmp_path / "hyperpod-scheduler.yaml"
        config.write_text(
            "defaults: {poll_seconds: 0.05, schedule: office}\n"
            "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
            "targets: [{region: us-east-1, clusters: [c1]}]\n"
        )
        client = shared_session().client("sagemaker", endpoint_url=emu.endpoint)
        client.create_cluster(**three_tier_request())
        waiter_ok = False
        for _ in range(400):
            d = client.describe_cluster(ClusterName="c1")
            if d["ClusterStatus"] == "InService" and all(
                g["CurrentCount"] == g["TargetCount"] for g in d["InstanceGroups"]
            ):
                waiter_ok = True
                break
            time.sleep(0.05)
        assert waiter_ok
        yield emu, tmp_path / "state.sqlite"


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_manual_stop_start_status_history(live: tuple[Emulator, Path]) -> None:
    _, state = live
    code, out = invoke("stop", "c1", "--dry-run", "--state", str(state))
    assert code == 0 and "would stop" in out
    assert (
        not state.exists()
        or json.loads(invoke("status", "--json", "--state", str(state))[1])[0]["recorded_sizes"] == {}
    )

    code, out = invoke("stop", "c1", "--wait", "--state", str(state))
    assert code == 0, out
    assert "stop settled" in out
    code, out = invoke("status", "--json", "--state", str(state))
    row = json.loads(out)[0]
    assert row["recorded_sizes"] == {"controller": 1, "dev": 2, "train": 3}
    assert row["state"] == "stopped"

    code, out = invoke("start", "c1", "--wait", "--state", str(state))
    assert code == 0 and "start settled" in out and "train restored 3/3" in out
    # --wait shows the start coming up group by group, and the settled line its phases.
    assert re.search(r"\d\d:\d\d: .*\d of 3 trn1 up", out), out
    assert "train: launched +" in out
    code, out = invoke("history", "c1", "--json", "--state", str(state))
    entries = json.loads(out)
    actions = [e["action"] for e in entries]
    assert actions[:2] == ["start", "stop"]
    assert set(entries[0]["detail"]["phases"]) == {"controller", "dev", "train"}
    code, out = invoke("history", "c1", "-o", "wide", "--state", str(state))  # wide: never cut
    assert code == 0 and "launched +" in out and "'requested'" not in out  # one line, not the raw dict


def test_hold_and_release(live: tuple[Emulator, Path]) -> None:
    _, state = live
    code, out = invoke("hold", "c1", "--until", "2099-01-01T00:00Z", "--state", str(state))
    assert code == 0 and "held running" in out
    row = json.loads(invoke("status", "--json", "--state", str(state))[1])[0]
    assert (row["hold"]["state"], row["hold"]["until"]) == ("running", "2099-01-01T00:00:00Z")
    code, out = invoke("release", "c1", "--state", str(state))
    assert code == 0 and "released" in out


def test_plan_lists_transitions_without_touching_anything(live: tuple[Emulator, Path]) -> None:
    _, state = live
    code, out = invoke("plan", "--json", "--until", "2099-01-01T00:00Z", "--state", str(state))
    assert code == 0
    planned = json.loads(out)
    steps = planned["steps"]
    assert steps and {s["action"] for s in steps} == {"start", "stop"}
    # Every step says why, in the schedule's own words (issue 27 item 8: the column was empty).
    assert all(s["why"] for s in steps), steps
    assert any("window ends" in s["why"] for s in steps if s["action"] == "stop")
    code, table = invoke("plan", "--until", "2099-01-01T00:00Z", "--state", str(state))
    assert code == 0 and "window opens" in table, table
    (c1,) = planned["clusters"]
    assert c1["protected"] == []  # m5, g5 and trn1 groups: nothing scarce
    assert any("Slurm controller" in w for w in c1["warnings"])
    assert (
        not state.exists() or json.loads(invoke("status", "--json", "--state", str(state))[1])[0]["state"] == "unknown"
    )


def test_tick_at_an_instant(live: tuple[Emulator, Path]) -> None:
    _, state = live
    code, out = invoke("tick", "--at", "2026-12-05T12:00Z", "--json", "--state", str(state))  # a Saturday
    assert code == 0
    assert json.loads(out)[0]["kind"] == "sent"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("tick", "--at", "yesterday"), "--at: 'yesterday' is not an ISO 8601"),
        (("hold", "c1", "--state-wanted", "asleep"), "--state-wanted: 'asleep'"),
    ],
)
def test_bad_input_is_one_line(live: tuple[Emulator, Path], args: tuple[str, ...], needle: str) -> None:
    import subprocess
    import sys

    from hyperpod_scheduler.cli.main import main

    _, state = live
    proc = subprocess.run(
        [sys.executable, "-m", "hyperpod_scheduler.cli.main", *args, "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=state.parent,
    )
    assert proc.returncode == 2
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert main  # the console script entry point exists


def test_config_typo_is_named(tmp_path: Path) -> None:
    import subprocess
    import sys

    cfg = tmp_path / "c.yaml"
    cfg.write_text("targets: [{region: us-east-1, clusterz: [a]}]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "hyperpod_scheduler.cli.main", "status", "--config", str(cfg), "--state", "memory:"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "targets[0].clusterz" in proc.stderr and "Traceback" not in proc.stderr


def test_status_with_nothing_to_show_says_what_makes_a_cluster_appear(live: tuple[Emulator, Path]) -> None:
    _, state = live
    empty = state.parent / "empty.yaml"
    empty.write_text("targets: []\n")
    code, out = invoke("status", "--config", str(empty), "--state", str(state))
    assert code == 0, out
    assert "no clusters" in out and "hyperpod-scheduler:schedule" in out
    code, out = invoke("status", "--state", str(state))  # the config names c1: no hint
    assert code == 0 and "c1" in out and "no clusters" not in out


def test_a_cluster_named_without_a_region_is_acted_on_in_the_chains_region(
    live: tuple[Emulator, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    emu, state = live
    # The emulator keeps each region's clusters apart, as AWS does: c1 of us-east-1 is not here.
    dublin = shared_session("eu-west-1").client("sagemaker", endpoint_url=emu.endpoint)
    dublin.create_cluster(**three_tier_request("c9"))
    for _ in range(400):
        if dublin.describe_cluster(ClusterName="c9")["ClusterStatus"] == "InService":
            break
        time.sleep(0.05)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    empty = state.parent / "empty.yaml"
    empty.write_text("targets: []\n")
    code, out = invoke("stop", "c9", "--wait", "--config", str(empty), "--state", str(state))
    assert code == 0, out
    code, out = invoke("status", "--json", "--config", str(empty), "--state", str(state))
    assert [row["key"] for row in json.loads(out)] == ["123456789012/eu-west-1/c9"]  # the account its ARN names
    assert all(g["CurrentCount"] == 0 for g in dublin.describe_cluster(ClusterName="c9")["InstanceGroups"])


def _c1_arn_and_no_config(emu: Emulator, tmp_path: Path) -> tuple[str, Path]:
    """c1's ARN, and an empty config file (a cluster no config governs)."""
    arn = str(
        shared_session().client("sagemaker", endpoint_url=emu.endpoint).describe_cluster(ClusterName="c1")["ClusterArn"]
    )
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    return arn, empty


def test_a_cluster_stopped_by_its_arn_is_started_by_its_name_with_its_sizes(
    live: tuple[Emulator, Path], tmp_path: Path
) -> None:
    # Kept under the ARN, the stop's sizes were where a start by name (or the schedule's) never looked:
    # "nothing recorded for this cluster: start does nothing", exit 0, the sizes as good as lost.
    emu, state = live
    arn, empty = _c1_arn_and_no_config(emu, tmp_path)
    code, out = invoke("stop", arn, "--wait", "--state", str(state), "--config", str(empty))
    assert code == 0 and "stop settled" in out, out
    code, out = invoke("status", "--json", "--state", str(state), "--config", str(empty))
    (row,) = json.loads(out)
    assert row["cluster"] == "c1" and row["region"] == "us-east-1"  # one record, under the cluster's name
    assert row["recorded_sizes"] == {"controller": 1, "dev": 2, "train": 3}
    code, out = invoke("start", "c1", "--wait", "--state", str(state), "--config", str(empty))
    assert code == 0 and "train restored 3/3" in out, out
    wrong = runner.invoke(app, ["stop", arn, "--dry-run", "--region", "eu-west-1", "--state", str(state)])
    assert isinstance(wrong.exception, UsageError)
    assert str(wrong.exception).startswith("--region 'eu-west-1' is not the region of cluster ARN")


def test_sizes_an_earlier_release_kept_under_an_arn_are_still_found_by_it(
    live: tuple[Emulator, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hyperpod_scheduler.cli import refs

    emu, state = live
    arn, empty = _c1_arn_and_no_config(emu, tmp_path)
    with monkeypatch.context() as earlier:  # the release that kept the record under the ARN
        earlier.setattr(refs, "_by_name", lambda ctx, name, region, profile: (name, region))
        code, out = invoke("stop", arn, "--wait", "--state", str(state), "--config", str(empty))
        assert code == 0 and "stop settled" in out, out
    code, out = invoke("start", arn, "--wait", "--state", str(state), "--config", str(empty))
    assert code == 0 and "train restored 3/3" in out, out


def test_status_and_plan_say_what_they_left_out_and_exit_1(live: tuple[Emulator, Path], tmp_path: Path) -> None:
    # A target that cannot be read (a profile that does not exist) was left out of `status` without a word
    # (exit 0), and `plan` said it but exited 0: a monitor saw a fleet with a target missing as healthy.
    _, state = live
    config = tmp_path / "two-targets.yaml"
    config.write_text(
        "defaults: {schedule: office}\n"
        "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
        "targets: [{region: us-east-1, clusters: [c1]}, {region: us-east-1, profile: nope, tag_selector: true}]\n"
    )
    for command in (["status", "--json"], ["plan", "--json"]):
        result = runner.invoke(app, [*command, "--config", str(config), "--state", str(state)])
        assert result.exit_code == 1, (command, result.output)
        assert (
            "targets[1] (us-east-1, profile nope) skipped: The config profile (nope) could not be found"
            in result.stderr
        )
        shown = json.loads(result.stdout)
        clusters = [r["cluster"] for r in shown] if command[0] == "status" else [s["cluster"] for s in shown["steps"]]
        assert set(clusters) == {"c1"}  # the rest is shown as usual


@pytest.mark.parametrize("region", ["us-east-1/x", "US-EAST-1", "eu-west-1 "])
def test_a_region_option_that_is_not_an_aws_region_is_a_usage_error(live: tuple[Emulator, Path], region: str) -> None:
    # 'US-EAST-1' stopped the cluster under a second record (start --region us-east-1: "nothing recorded");
    # 'us-east-1/x' was botocore's error, exit 1, not naming --region.
    _, state = live
    for command in (["stop", "c1", "--dry-run", "--state", str(state)], ["cluster", "describe", "c1"]):
        result = runner.invoke(app, [*command, "--region", region])
        assert isinstance(result.exception, UsageError), (command, result.output)
        assert str(result.exception).startswith("--region: ") and "is not an AWS region" in str(result.exception)


def test_an_empty_profile_is_a_usage_error_not_an_aws_one(live: tuple[Emulator, Path]) -> None:
    # `--profile ''` (a script's unset variable) was "The config profile () could not be found", exit 1.
    _, state = live
    for command in (["claim", "c1", "--state", str(state)], ["stop", "c1", "--dry-run"], ["cluster", "describe", "c1"]):
        result = runner.invoke(app, [*command, "--profile", ""])
        assert isinstance(result.exception, UsageError), (command, result.output)
        assert str(result.exception) == "--profile: empty; leave it out for the default credentials"


def test_a_config_that_lists_a_cluster_by_its_arn_meets_commands_by_that_arn(
    live: tuple[Emulator, Path], tmp_path: Path
) -> None:
    # The ARN was turned into the name before the config was asked, so the command missed the entry that
    # lists the ARN: two records (the tick's under the ARN), a hold the tick did not see.
    emu, state = live
    arn, _ = _c1_arn_and_no_config(emu, tmp_path)
    config = tmp_path / "by-arn.yaml"
    config.write_text(
        "defaults: {poll_seconds: 0.05, schedule: office}\n"
        "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
        f"targets: [{{region: us-east-1, clusters: ['{arn}']}}]\n"
    )
    common = ["--state", str(state), "--config", str(config)]
    code, out = invoke("stop", arn, "--wait", *common)
    assert code == 0 and "stop settled" in out, out
    code, out = invoke("status", "--json", *common)
    assert code == 0 and len(json.loads(out)) == 1, out  # one record, the one the tick keeps
    code, out = invoke("tick", "--at", "2026-12-03T09:00:00Z", *common)  # a Thursday, in the window
    assert "nothing recorded" not in out, out


def test_a_cluster_arn_aws_does_not_know_is_a_usage_error(live: tuple[Emulator, Path], tmp_path: Path) -> None:
    emu, state = live
    arn, empty = _c1_arn_and_no_config(emu, tmp_path)
    wrong = arn[:-3] + "zzz"
    result = runner.invoke(app, ["start", wrong, "--dry-run", "--state", str(state), "--config", str(empty)])
    assert isinstance(result.exception, UsageError), result.output
    said = str(result.exception)  # quoted() shortens a long value in the middle
    assert said.startswith("cluster ARN 'arn:aws:sagemaker:us-east-1:") and "not found in us-east-1" in said


@pytest.mark.parametrize("option", ["--state", "--config"])
def test_an_empty_state_or_config_option_is_a_usage_error_not_the_default(
    live: tuple[Emulator, Path], option: str
) -> None:
    # `--state "$STATE"` with STATE unset used the default store, where this fleet's records are not.
    result = runner.invoke(app, ["status", option, ""])
    assert isinstance(result.exception, UsageError), result.output
    assert str(result.exception).startswith(f"{option}: empty; leave it out for ")
