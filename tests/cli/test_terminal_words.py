"""What the terminal says, in words a person reads (issue 27): a tick with nothing due says so and what
comes next, instants keep the zone they were given, and the CLI's own families of text (reprs, doubled
prefixes, mistyped commands, -o beside --json) hold."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.cli.output import Column, Format, Listing
from hyperpod_scheduler.cli.terminal import SafeConsole, rich_table
from hyperpod_scheduler.cli.waiting import WaitView
from hyperpod_scheduler.emulator import running_emulator
from hyperpod_scheduler.engine.events import Event
from tests.engine.conftest import three_tier_request
from tests.reliability.cli_inproc import cli
from tests.sessions import shared_session

runner = CliRunner()
AT = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    with running_emulator(speed=3000, seed=5, in_process=True) as emu:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", emu.endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.chdir(tmp_path)
        (tmp_path / "hyperpod-scheduler.yaml").write_text(
            "defaults: {poll_seconds: 0.05, schedule: office}\n"
            "schedules: {office: {windows: ['Mon-Fri 08:00-18:00'], timezone: Europe/Berlin}}\n"
            "targets: [{region: us-east-1, clusters: [c1]}]\n"
        )
        client = shared_session().client("sagemaker", endpoint_url=emu.endpoint)
        client.create_cluster(**three_tier_request())
        for _ in range(400):
            d = client.describe_cluster(ClusterName="c1")
            if d["ClusterStatus"] == "InService":
                break
            time.sleep(0.05)
        yield tmp_path / "state.sqlite"


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_a_tick_with_nothing_due_says_so_and_what_comes_next(live: Path) -> None:
    # Thursday 09:30 Berlin: c1 runs, as the office schedule wants; nothing to do until 18:00 Berlin.
    code, out = invoke("tick", "--at", "2026-12-03T09:30+01:00", "--state", str(live))
    assert code == 0, out
    assert "nothing due at Thu 09:30 UTC+01:00" in out, out
    assert "next: c1 stop Thu 3 Dec 18:00 CET" in out, out


def test_a_mistyped_command_names_the_nearest_one() -> None:
    ran = cli("stpo", "g5-dev")
    assert ran.code == 2
    assert "did you mean 'stop'?" in ran.one_error_line()


@pytest.mark.parametrize("command", [["stop", "c1"], ["start", "c1"], ["schedule", "check", "Mon-Fri 08:00-18:00 UTC"]])
def test_every_command_with_json_takes_o_json(command: list[str]) -> None:
    helped = cli(*command[:-1] if command[0] != "schedule" else command[:2], "--help")
    assert "--json" in helped.out and "-o, --output" in helped.out, helped.out
    ran = cli(*command, "-o", "yaml", "--at", "2026-12-01T10:00Z") if command[0] == "schedule" else None
    if ran is not None:
        assert "'yaml' is not one of json, table" in ran.one_error_line()


def test_schedule_check_o_json_is_its_json() -> None:
    args = ("schedule", "check", "Mon-Fri 08:00-18:00 UTC", "--at", "2026-12-01T10:00Z")
    assert cli(*args, "-o", "json").out == cli(*args, "--json").out
    assert json.loads(cli(*args, "-o", "json").out)


def _drawn(listing: Listing, fmt: Format, columns: int) -> str:
    out = io.StringIO()
    SafeConsole(file=out, width=columns, force_terminal=False, highlight=False).print(rich_table(listing, fmt))
    return out.getvalue()


_FLEET = Listing(
    [Column("cluster", keep=True), Column("state"), Column("billing now"), Column("why"), Column("recorded sizes")],
    [
        [
            "p5-training",
            "running (held-by-ops-until-Mon-08:00)",
            "$98.32/h",
            "instance-hours avoided tonight: none, every group protected (ml.p5.48xlarge-capacity-block)",
            "controller=1 workers=4",
        ],
        ["g5-dev", "stopped", "$0.00/h", "the schedule wants it stopped", "controller=1 g5-workers=6"],
    ],
)


@pytest.mark.parametrize("columns", [80])
def test_a_table_at_80_columns_never_breaks_a_word_across_lines(columns: int) -> None:
    drawn = _drawn(_FLEET, "table", columns)
    words = {w for row in _FLEET.rows for cell in row for w in cell.split()} | {
        w for c in _FLEET.columns for w in c.header.split()
    }
    for line in drawn.splitlines():
        assert len(line) <= columns, drawn
        for token in line.replace("─", " ").split():
            assert token in words or token.endswith("…"), (token, drawn)


def test_status_wide_keeps_its_header_on_one_line_at_120_columns() -> None:
    drawn = _drawn(_FLEET, "wide", 120)
    head = next(line for line in drawn.splitlines() if line.strip())
    assert all(c.header in head for c in _FLEET.columns), drawn
    assert all(len(line) <= 120 for line in drawn.splitlines()), drawn


def test_a_start_short_of_capacity_says_what_will_send_its_retry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Three trn1 in the pool: c1 gives them back at its stop, c2 takes them, c1's start rolls back.
    capacity = {"instance_types": {"ml.trn1.32xlarge": {"available": 3}}}
    with running_emulator(speed=3000, seed=5, capacity=capacity, in_process=True) as emu:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", emu.endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.chdir(tmp_path)
        (tmp_path / "hyperpod-scheduler.yaml").write_text(
            "defaults: {poll_seconds: 0.05, schedule: office}\n"
            "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
            "targets: [{region: us-east-1, clusters: [c1]}]\n"
        )
        state = str(tmp_path / "state.sqlite")
        client = shared_session().client("sagemaker", endpoint_url=emu.endpoint)
        client.create_cluster(**three_tier_request())
        code, out = invoke("stop", "c1", "--wait", "--state", state)
        assert code == 0, out
        client.create_cluster(**three_tier_request("c2"))
        for _ in range(600):
            if client.describe_cluster(ClusterName="c2")["ClusterStatus"] in ("InService", "Failed"):
                break
            time.sleep(0.05)
        code, out = invoke("start", "c1", "--wait", "--state", state)
    assert code == 1, out
    assert "retry 1 is due at" in out and "the next `hyperpod-scheduler tick` (cron) or `run` loop" in out, out


def test_recorded_sizes_read_as_words_not_a_dict(live: Path) -> None:
    code, out = invoke("stop", "c1", "--state", str(live))
    assert code == 0, out
    assert "recorded sizes controller 1, dev 2, train 3" in out and "{'" not in out, out
    code, out = invoke("forget", "c1", "--state", str(live))
    assert "{'" not in out, out


def test_the_wait_view_never_doubles_a_prefix() -> None:
    view = WaitView(cluster="c1", action="stop", clock=lambda: 0.0, started=0.0)
    view.take(Event(AT, "c1", "blocked", "stop blocked: checkpoints: job 7 has none"))
    assert view.status == "stop blocked: checkpoints: job 7 has none"
    view.take(Event(AT, "c1", "progress", "start: 08:05: 0 of 6 g5 up; 6 not launched yet"))
    assert view.status == "start: 08:05: 0 of 6 g5 up; 6 not launched yet"
    view.take(Event(AT, "c1", "settled", "stop settled after 4 s"))
    assert view.status == "stop settled after 4 s"
    view.take(Event(AT, "c1", "note", "phases: no events"))
    assert view.status == "note: phases: no events"
