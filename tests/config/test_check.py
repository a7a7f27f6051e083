"""Config loading refuses names that mean nothing, with one line naming the key (issue 12)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app as cli_app
from hyperpod_scheduler.config.load import parse_config
from hyperpod_scheduler.errors import UsageError

OFFICE = {"office": "Mon-Fri 08:00-18:00 UTC"}


def _config(**target: object) -> dict[str, object]:
    return {"schedules": OFFICE, "targets": [{"region": "us-east-1", **target}]}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_config(clusters=[{"name": "c1", "schedule": "ofice"}]), "targets[0].clusters[0].schedule: "),
        (_config(schedule="offce", clusters=["c1"]), "targets[0].schedule: "),
        ({**_config(clusters=["c1"]), "defaults": {"schedule": "weekdays"}}, "defaults.schedule: "),
        (_config(clusters=["c1"]), "targets[0].clusters[0] ('c1'): no schedule"),
        ({"schedules": {"office": "Mon-Fry 08:00-18:00 UTC"}}, "schedule 'office'"),
        (
            _config(schedule="office", clusters=["c1"], checkpoints={"channel": "memory:"}),
            "targets[0].checkpoints.channel: 'memory:' lives in this process's memory",
        ),
        (
            {**_config(schedule="office", clusters=["c1"]), "defaults": {"checkpoints": {"channel": "s3:///p"}}},
            "defaults.checkpoints.channel: 's3:///p' names no bucket",
        ),
        (
            _config(schedule="office", clusters=[{"name": "c1", "checkpoints": {"channel": "ftp://x/y"}}]),
            "targets[0].clusters[0].checkpoints.channel: 'ftp://x/y' is not",
        ),
    ],
)
def test_what_cannot_be_honoured_is_refused_naming_the_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_config(data, "cfg.yaml")
    assert str(err.value).startswith("cfg.yaml: ") and message in str(err.value), err.value
    assert "\n" not in str(err.value)


def test_a_misspelt_schedule_names_the_schedules_there_are() -> None:
    with pytest.raises(UsageError, match=r"nor is it a named schedule \(known: office\)"):
        parse_config(_config(clusters=[{"name": "c1", "schedule": "ofice"}]))


def test_names_inline_expressions_and_tag_only_targets_load() -> None:
    config = parse_config(
        {
            "schedules": OFFICE,
            "targets": [
                {"region": "us-east-1", "schedule": "office", "clusters": ["a", {"name": "b", "schedule": "always"}]},
                {"region": "eu-west-1", "clusters": [{"name": "c", "schedule": "Mon-Fri 06:00-22:00 UTC"}]},
                {"region": "us-west-2", "tag_selector": True},  # each tag names its own schedule
            ],
        }
    )
    assert len(config.targets) == 3


@given(st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True))
def test_a_name_is_accepted_exactly_when_it_is_a_schedule(name: str) -> None:
    data = _config(clusters=[{"name": "c1", "schedule": name}])
    if name in OFFICE or name in ("always", "never"):
        parse_config(data)
        return
    with pytest.raises(UsageError, match=r"targets\[0\]\.clusters\[0\]\.schedule: "):
        parse_config(data)


def test_the_cli_refuses_the_config_with_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "schedules: {office: Mon-Fri 08:00-18:00 UTC}\ntargets: [{clusters: [{name: c1, schedule: ofice}]}]\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "hyperpod_scheduler.cli.main", "tick", "--config", str(path), "--state", "memory:"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "targets[0].clusters[0].schedule: " in lines[0] and "'ofice'" in lines[0], done.stderr
    for command in (["status"], ["plan", "--no-describe"], ["history", "c1"]):
        result = CliRunner().invoke(cli_app, [*command, "--config", str(path), "--state", "memory:"])
        assert isinstance(result.exception, UsageError) and "clusters[0].schedule" in str(result.exception), command
