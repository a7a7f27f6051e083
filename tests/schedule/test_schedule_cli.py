"""`hyperpod-scheduler schedule check|next`, run in-process the way cli/main.py runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hyperpod_scheduler.cli.schedule import app
from hyperpod_scheduler.errors import HyperpodSchedulerError

CONFIG = """
clusters: {ignored: by this module}
schedules:
  office:
    windows: Mon-Fri 08:00-19:00
    timezone: Europe/Berlin
    holidays: DE-BY
    mode: stop-only
  crons:
    start: "0 8 * * 1-5"
    stop: ["0 19 * * 1-5"]
    timezone: Europe/Berlin
"""


def run(*args: str) -> tuple[int, str, str]:
    """Exit code, stdout, and the one-line error main() would print for a HyperpodSchedulerError."""
    result = CliRunner().invoke(app, list(args))
    if isinstance(result.exception, HyperpodSchedulerError):
        return result.exception.exit_code, result.stdout, str(result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, ""


@pytest.mark.parametrize(
    ("when", "expected"),
    [("2026-11-30T09:00+01:00", "running"), ("2026-11-30T19:00+01:00", "stopped"), ("2026-11-30T07:30", "running")],
)
def test_check_prints_the_state(when: str, expected: str) -> None:
    # a missing offset means UTC: 07:30Z is 08:30 in Berlin
    assert run("check", "Mon-Fri 08:00-19:00 Europe/Berlin", "--at", when) == (0, expected + "\n", "")


def test_check_with_holidays() -> None:
    args = ("check", "Mon-Fri 08:00-19:00 America/Los_Angeles", "--at", "2026-12-25T10:00-08:00")
    assert run(*args)[1] == "running\n"
    assert run(*args, "--holidays", "US-CA")[1] == "stopped\n"


def test_check_json() -> None:
    code, out, _ = run("check", "Mon-Fri 08:00-19:00 Europe/Berlin", "--at", "2026-11-30T09:00+01:00", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["state"] == "running"
    assert data["at"] == "2026-11-30T08:00:00Z"
    assert data["next_transition"] == {
        "at": "2026-11-30T18:00:00Z",
        "local": "2026-11-30T19:00:00+01:00",
        "state": "stopped",
    }


def test_next_lists_local_and_utc() -> None:
    code, out, _ = run("next", "Mon-Fri 22:00-06:00 Europe/Berlin", "--from", "2026-12-04T12:00Z", "--count", "3")
    assert code == 0
    assert out.splitlines() == [
        "2026-12-04 Fri 22:00 CET  (2026-12-04T21:00Z)  running",
        "2026-12-05 Sat 06:00 CET  (2026-12-05T05:00Z)  stopped",
        "2026-12-07 Mon 22:00 CET  (2026-12-07T21:00Z)  running",
    ]


def test_next_json_and_nothing_to_list() -> None:
    code, out, _ = run("next", "never", "--from", "2026-12-04T12:00Z", "--json")
    assert (code, json.loads(out)["transitions"], json.loads(out)["state"]) == (0, [], "stopped")
    assert "stays stopped" in run("next", "never", "--from", "2026-12-04T12:00Z")[1]


def test_named_schedules_from_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "custom.yaml"
    config.write_text(CONFIG)
    assert run("check", "office", "--at", "2026-11-30T09:00+01:00", "--config", str(config))[1] == "running\n"
    assert run("check", "office", "--at", "2026-01-06T09:00+01:00", "--config", str(config))[1] == "stopped\n"
    code, out, _ = run("next", "crons", "--from", "2026-11-28T00:00Z", "--config", str(config), "--json")
    assert [t["at"] for t in json.loads(out)["transitions"]][:2] == ["2026-11-30T07:00:00Z", "2026-11-30T18:00:00Z"]
    # the default config is ./hyperpod-scheduler.yaml when present
    (tmp_path / "hyperpod-scheduler.yaml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run("check", "office", "--at", "2026-11-30T09:00+01:00", "--json")
    assert (code, json.loads(out)["mode"], json.loads(out)["schedule"]) == (0, "stop-only", "office")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("check", "Mon-Fry 08:00-19:00 UTC", "--at", "2026-11-30T09:00Z"), "unknown day 'Fry'"),
        (("next", "Mon-Fri 08:00-19:00 Mars/Base"), "unknown timezone 'Mars/Base'"),
        (("check", "always", "--at", "yesterday"), "--at: 'yesterday' is not an ISO 8601 date-time"),
        (("next", "always", "--from", "2026-13-01"), "--from: '2026-13-01'"),
        (("check", "always", "--holidays", "ZZ"), "holidays 'ZZ'"),
        (("check", "office"), "nor is it a named schedule (known: none configured)"),
        (("check", "always", "--config", "/nonexistent/x.yaml"), "--config: cannot read '/nonexistent/x.yaml'"),
    ],
)
def test_bad_input_exits_2_naming_the_token(
    args: tuple[str, ...], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no stray default config
    code, _, error = run(*args)
    assert code == 2
    assert message in error
    assert "\n" not in error


def test_bad_config_names_file_schedule_and_field(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("schedules:\n  office:\n    windows: Mon-Fri 08:00-19:00 UTC\n    mode: weekly\n")
    code, _, error = run("check", "office", "--config", str(config))
    assert code == 2
    assert error.startswith(f"{config}: schedule 'office': mode: ")
    assert "'weekly'" in error
    config.write_text("schedules: [unclosed\n")
    assert "not valid YAML" in run("check", "office", "--config", str(config))[2]


def test_console_script_exits_2_with_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "hyperpod_scheduler.cli.main", "schedule", "check", "Mon-Fri 08:00-19:00 Nowhere/City"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: schedule expression 'Mon-Fri 08:00-19:00 Nowhere/City': unknown timezone 'Nowhere/City' "
        "(expected an IANA name such as Europe/Berlin or UTC)"
    ]
