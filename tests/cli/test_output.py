"""The CLI as a person and a script see it: its stdout a pipe (the CLI in this process) or a terminal
(the console script in a child process on a pty), against the emulator on a virtual clock the test
moves. Output forms, widths, the live --wait display, waiting out a Creating cluster, usage errors and
the documented exit codes."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.engine.conftest import three_tier_request
from tests.reliability.cli_inproc import completed
from tests.sessions import shared_session

START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)  # a Tuesday morning
BOX = set("─━│┃┌┏└┗")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Emulator, dict[str, str], Path]]:
    with running_emulator(virtual_start=START, seed=3, in_process=True) as emu:
        config = tmp_path / "hyperpod-scheduler.yaml"
        config.write_text(
            "state: " + str(tmp_path / "state.sqlite") + "\n"
            "defaults: {poll_seconds: 0.2, schedule: office}\n"
            "schedules: {office: 'Mon-Fri 08:00-18:00 Europe/Berlin'}\n"
            "targets: [{clusters: [c1]}]\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HYPERPOD_SCHEDULER_", "COLUMNS"))}
        env.update(
            AWS_ENDPOINT_URL=emu.endpoint,
            AWS_ACCESS_KEY_ID="t",
            AWS_SECRET_ACCESS_KEY="t",
            AWS_DEFAULT_REGION="us-east-1",
            HYPERPOD_SCHEDULER_CONFIG=str(config),
            HOME=str(tmp_path),
        )
        yield emu, env, tmp_path


def _client(emu: Emulator) -> Any:
    session = shared_session()
    return session.client("sagemaker", endpoint_url=emu.endpoint)


def _settle(emu: Emulator, name: str = "c1") -> None:
    client = _client(emu)
    for _ in range(200):
        d = client.describe_cluster(ClusterName=name)
        steady = all(g["CurrentCount"] == g["TargetCount"] for g in d["InstanceGroups"])
        if d["ClusterStatus"] == "InService" and steady:
            return
        emu.advance(60)
    raise AssertionError("cluster did not settle")


def cli(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """The CLI with its stdout a pipe, in this process (what it prints is the subject here, and a child
    process cost a second each); the terminal tests below keep a child on a pty."""
    return completed(args, {**env, **extra})


def in_pty(env: dict[str, str], *args: str, columns: int = 120, on_output: Any = None) -> tuple[int, str]:
    """Run the CLI with a terminal as stdout; ``on_output(text_so_far)`` is called as output arrives."""
    main, child = pty.openpty()
    os.set_blocking(main, False)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hyperpod_scheduler.cli.main", *args],
        env={**env, "COLUMNS": str(columns), "LINES": "40", "TERM": "xterm-256color"},
        stdin=child,
        stdout=child,
        stderr=child,
    )
    os.close(child)
    out = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                chunk = b""
            out += chunk
            if on_output is not None and chunk:
                on_output(out.decode(errors="replace"))
            if not chunk and proc.poll() is not None:
                break  # the child is gone: its end of the terminal reads as ready and empty (EIO) forever
        if proc.poll() is not None and not ready:
            break
    os.close(main)
    return proc.wait(timeout=10), out.decode(errors="replace")


@pytest.fixture
def stopped(world: tuple[Emulator, dict[str, str], Path]) -> tuple[Emulator, dict[str, str], Path]:
    emu, env, _ = world
    _client(emu).create_cluster(**three_tier_request())
    _settle(emu)
    with emu.paused():
        pass
    done = cli(env, "stop", "c1")
    assert done.returncode == 0, done.stderr
    _settle(emu)
    assert cli(env, "tick").returncode == 0  # follows the stop to its end and records it
    return world


def test_piped_tables_are_plain_and_fit_the_width(stopped: tuple[Emulator, dict[str, str], Path]) -> None:
    _, env, _ = stopped
    plain = cli(env, "status")
    assert plain.returncode == 0, plain.stderr
    lines = plain.stdout.splitlines()
    assert lines[1].split()[:3] == ["CLUSTER", "STATE", "SCHEDULE"] and not BOX & set(plain.stdout)
    assert "c1" in lines[2] and "stopped" in lines[2]
    wide = cli(env, "status", "-o", "wide")
    assert "RECORDED SIZES" in wide.stdout and "controller=1" in wide.stdout
    narrow = cli(env, "history", "c1", COLUMNS="70")
    assert all(len(line) <= 70 for line in narrow.stdout.splitlines()[1:]), narrow.stdout
    assert "…" in narrow.stdout  # the sentence was cut to fit; -o wide never cuts
    assert "…" not in cli(env, "history", "c1", "-o", "wide", COLUMNS="70").stdout


def test_json_and_yaml_carry_the_same_document(stopped: tuple[Emulator, dict[str, str], Path]) -> None:
    _, env, _ = stopped
    as_json = json.loads(cli(env, "status", "-o", "json").stdout)
    assert as_json == json.loads(cli(env, "status", "--json").stdout)
    assert yaml.safe_load(cli(env, "status", "-o", "yaml").stdout) == as_json
    assert as_json[0]["state_text"].startswith("stopped")
    history = yaml.safe_load(cli(env, "history", "c1", "-o", "yaml").stdout)
    assert history[0]["sentence"].startswith("stopped in ") and "outcomes={" not in history[0]["sentence"]
    plan = json.loads(cli(env, "plan", "--no-describe", "-o", "json").stdout)
    assert {s["action"] for s in plan["steps"]} == {"start", "stop"}


def test_in_a_terminal_tables_are_drawn_by_rich(stopped: tuple[Emulator, dict[str, str], Path]) -> None:
    _, env, _ = stopped
    code, out = in_pty(env, "status")
    assert code == 0 and BOX & set(out) and "c1" in out


def test_wait_on_a_creating_cluster_waits_and_shows_each_group(world: tuple[Emulator, dict[str, str], Path]) -> None:
    emu, env, _ = world
    _client(emu).create_cluster(**three_tier_request())  # Creating until the clock moves
    refused = cli(env, "stop", "c1")
    assert refused.returncode == 3, refused.stderr  # nothing could be done, and it says so
    assert "cluster is Creating" in refused.stderr and "--wait" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1

    def move(text: str) -> None:
        if "waiting" in text or "sent" in text:
            emu.advance(120)  # the live display saw the wait (or the update going out): let time pass

    code, out = in_pty(env, "stop", "c1", "--wait", on_output=move)
    assert code == 0, out
    assert "nodes now / target" in out and "elapsed" in out and "cluster is Creating" in out
    assert "stop settled" in out or "c1: stop settled" in out
    status = json.loads(cli(env, "status", "-o", "json").stdout)[0]
    assert status["state"] == "stopped" and status["recorded_sizes"]["controller"] == 1


def test_usage_errors_are_one_line_and_say_where_to_look(world: tuple[Emulator, dict[str, str], Path]) -> None:
    _, env, tmp = world
    for args, needle, code in (
        (("stop",), "Missing argument 'CLUSTER'", 2),
        (("status", "--bogus"), "No such option: --bogus", 2),
        (("status", "-o", "xml"), "-o/--output: 'xml' is not one of table, wide, json, yaml", 2),
        (("status", "--json", "-o", "yaml"), "choose one output", 2),
        (("hold", "nope"), "cluster 'nope' not found", 2),
        (("history", "nope"), "no record of cluster 'nope'", 2),
    ):
        done = cli(env, *args)
        assert done.returncode == code, (args, done.stderr)
        assert done.stderr.count("\n") == 1 and needle in done.stderr, (args, done.stderr)
        assert done.stderr.startswith("error: ")
    bare = {k: v for k, v in env.items() if k != "HYPERPOD_SCHEDULER_CONFIG"}
    elsewhere = tmp / "elsewhere"  # no ./hyperpod-scheduler.yaml here either
    elsewhere.mkdir()
    for command in ("tick", "plan", "run"):
        done = completed([command], bare, cwd=elsewhere)
        assert done.returncode == 2 and f"{command}: no config file" in done.stderr, done.stderr
    helped = cli(env, "stop", "--help")
    assert "<bool>" not in helped.stdout and "--wait" in helped.stdout and "Exit 0" in helped.stdout
