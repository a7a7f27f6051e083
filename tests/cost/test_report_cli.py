"""``hyperpod-scheduler report`` as a user runs it: a store with history, FSx in moto, JSON, CSV and table."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
import typer
from moto import mock_aws
from typer.testing import CliRunner

from hyperpod_scheduler.cli import report as report_cli
from hyperpod_scheduler.cost import summary
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store import SqliteStore
from hyperpod_scheduler.store.records import HistoryEntry

runner = CliRunner()
KEY = "default/us-east-1/train"
D0 = datetime(2026, 11, 2, tzinfo=UTC)
SIZES = {"gpu": {"count": 2, "instance_type": "ml.p5.48xlarge"}, "ctl": {"count": 1, "instance_type": "ml.m5.xlarge"}}


def _app() -> typer.Typer:
    app = typer.Typer()
    report_cli.register(app)

    @app.callback()
    def _root() -> None:  # keeps "report" a named sub-command, as under the real root app
        pass

    return app


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    for var, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("HOME", str(tmp_path)),  # the price cache, if any, lands here
        ("XDG_CONFIG_HOME", str(tmp_path / "config")),  # no stray default override file
    ):
        monkeypatch.setenv(var, value)
    monkeypatch.chdir(tmp_path)
    state = tmp_path / "state.db"
    with SqliteStore(str(state)) as store:
        for day in range(3):
            store.append_history(
                HistoryEntry(
                    key=KEY,
                    at=D0 + timedelta(days=day, hours=20),
                    action="stop",
                    actor="t",
                    outcome="ok",
                    duration_s=300,
                    detail={"outcomes": {"gpu": "stopped 0/0", "ctl": "kept 1/1"}, "sizes": SIZES},
                )
            )
            outcomes = {"gpu": "partial 1/2" if day == 2 else "restored 2/2", "ctl": "restored 1/1"}
            store.append_history(
                HistoryEntry(
                    key=KEY,
                    at=D0 + timedelta(days=day + 1, hours=8),
                    action="start",
                    actor="t",
                    outcome="ok",
                    duration_s=1800,
                    detail={"outcomes": outcomes},
                )
            )
    yield state


def _run(*args: str, env: dict[str, str] | None = None) -> Any:
    return runner.invoke(_app(), ["report", *args], env=env)


WINDOW = ("--since", "2026-11-02T00:00Z", "--until", "2026-11-05T12:00Z")


def test_json_report_has_saving_fsx_while_stopped_kept_and_shortfalls(env: Path) -> None:
    with mock_aws():
        fsx = boto3.client("fsx", region_name="us-east-1")
        fsx.create_file_system(
            FileSystemType="LUSTRE",
            StorageCapacity=7300,
            SubnetIds=["subnet-0123456789"],
            LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250},
            Tags=[{"Key": "hyperpod-scheduler:cluster", "Value": "train"}],
        )
        result = _run(*WINDOW, "--state", str(env), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    (c,) = doc["clusters"]
    assert c["cluster"] == "train" and c["nights"] == 3
    w = c["window"]
    assert w["stopped_hours"] == pytest.approx(3 * 11.5, abs=0.1)
    assert w["saving"] == pytest.approx(2 * 98.32 * 34.5, abs=0.01)  # the GPUs avoided, nothing subtracted
    assert w["kept_cost"] == pytest.approx(0.269 * 34.5, abs=0.01)  # the controller kept
    assert w["fsx_while_stopped"] == pytest.approx(7300 * 0.21 / 730 * 34.5, abs=0.01)
    assert c["per_night"]["saving"] == pytest.approx(w["saving"] / 3, abs=0.01)
    assert c["file_systems"][0]["found_by"] == ["tag"] and c["fsx_per_month"] == pytest.approx(1533.0)
    assert [(s["group"], s["restored"], s["wanted"]) for s in c["shortfalls"]] == [("gpu", 1, 2)]
    assert doc["total"]["window"] == w
    assert any("as of 2026-11-29" in s for s in doc["price_sources"])
    used = {p["item"] for p in doc["prices"]}
    assert used == {"instance_hourly ml.p5.48xlarge", "instance_hourly ml.m5.xlarge", "fsx_gb_month PERSISTENT_2/250"}


def test_table_shows_fsx_beside_the_saving(env: Path) -> None:
    result = _run(*WINDOW, "--state", str(env), "--no-fsx", env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    for text in (
        "never subtracted",
        "per month",
        "TOTAL",
        "FSx discovery skipped",
        "group 'gpu' partial: 1 of 2",
        "train: kept $3.09 a night (not saved): ctl stayed up",
        "prices from estimate: bundled table",
        "ml.p5.48xlarge: $98.32 per node-hour (AWS cut EC2 P4 and P5 On-Demand prices by up to 45% in June 2025",
    ):
        assert text in " ".join(result.output.split()), text
    assert "net" not in result.output.lower()


def test_csv_has_a_row_per_cluster_and_period(env: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    result = _run(*WINDOW, "--state", str(env), "--no-fsx", "--csv", str(out))
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out.open()))
    assert [(r["cluster"], r["period"]) for r in rows] == [
        (name, period) for name in ("train", "TOTAL") for period in ("window", "per_night", "per_month")
    ]
    assert float(rows[0]["saving_usd"]) > float(rows[1]["saving_usd"]) > 0
    assert list(rows[0]) == list(summary.CSV_COLUMNS)


def test_override_prices_from_the_command_line(env: Path, tmp_path: Path) -> None:
    prices = tmp_path / "p.yaml"
    prices.write_text("instance_hourly: {ml.p5.48xlarge: 10}\n")
    result = _run(*WINDOW, "--state", str(env), "--no-fsx", "--json", "--prices", str(prices))
    doc = json.loads(result.output)
    assert doc["clusters"][0]["window"]["saving"] == pytest.approx(2 * 10 * 34.5, abs=0.01)
    (p5,) = [p for p in doc["prices"] if p["item"] == "instance_hourly ml.p5.48xlarge"]
    assert p5["source"] == "override p.yaml" and not p5["estimate"]  # the price names where it came from


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--since", "yesterday"), "--since: 'yesterday' is not an ISO 8601"),
        (("--since", "2026-11-05T00:00Z", "--until", "2026-11-04T00:00Z"), "must be after --since"),
        (("--json", "--csv", "x.csv"), "choose one"),
        (("--price-source", "web"), "--price-source: 'web'"),
    ],
)
def test_bad_arguments_are_one_line_usage_errors(env: Path, args: tuple[str, ...], message: str) -> None:
    result = _run(*args, "--state", str(env), "--no-fsx")
    assert isinstance(result.exception, UsageError)
    assert message in str(result.exception)


def test_an_until_later_than_now_counts_only_up_to_now(env: Path) -> None:
    # The cluster is stopped now and the window asked for ends on a date not come yet ("this month"):
    # counted on, its open night ran to that date, a saving made up and shown as made.
    with SqliteStore(str(env)) as store:
        store.append_history(
            HistoryEntry(
                key=KEY,
                at=D0 + timedelta(days=3, hours=20),
                action="stop",
                actor="t",
                outcome="ok",
                duration_s=300,
                detail={"outcomes": {"gpu": "stopped 0/0", "ctl": "kept 1/1"}, "sizes": SIZES},
            )
        )
    later = (datetime.now(UTC) + timedelta(days=200)).isoformat()
    asked = _run("--since", "2026-11-02T00:00Z", "--until", later, "--state", str(env), "--no-fsx", "--json")
    up_to_now = _run("--since", "2026-11-02T00:00Z", "--state", str(env), "--no-fsx", "--json")
    assert asked.exit_code == 0 and up_to_now.exit_code == 0, asked.output
    asked_doc, now_doc = json.loads(asked.output), json.loads(up_to_now.output)
    hours = asked_doc["clusters"][0]["window"]["stopped_hours"]
    assert hours == pytest.approx(now_doc["clusters"][0]["window"]["stopped_hours"], abs=0.1)
    assert hours < (datetime.now(UTC) - D0).total_seconds() / 3600
    assert any(f"--until {later} is later than now: counted up to now" in n for n in asked_doc["notes"])
    ahead = _run("--since", later, "--state", str(env), "--no-fsx")
    assert isinstance(ahead.exception, UsageError)
    assert str(ahead.exception).startswith(f"--since {later} is not before now (")


def test_report_html_names_the_command_lines_options(env: Path, tmp_path: Path) -> None:
    # Its window came through the dashboard's Savings, which named the query's since/until.
    bad = _run("--html", str(tmp_path / "r.html"), "--since", "bogus", "--state", str(env), "--no-fsx")
    assert isinstance(bad.exception, UsageError) and str(bad.exception).startswith("--since: 'bogus'")
