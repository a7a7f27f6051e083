"""Issue 27: the CLI's status and the JSON API tell the same truth about each cluster, and that truth
is what the cluster is doing (not what its schedule last wanted)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app as cli_app
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.store.records import Approval, GroupOutcome, RetryState
from hyperpod_scheduler.web import create_app
from tests.web.conftest import TOKEN
from tests.web.fleet import DemoFleet, demo_fleet


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoFleet]:
    # Past 21:00 PST on Monday: p5-training's schedule has asked for a stop, and every group is kept.
    with demo_fleet(Path(tmp_path_factory.mktemp("night")), hours=42.0) as f:
        yield f


def _api(fleet: DemoFleet) -> dict[str, dict[str, object]]:
    client = TestClient(create_app(fleet.dashboard(TOKEN), allowed_hosts=["testserver"]))
    return {r["cluster"]: r for r in client.get("/api/fleet").json()}


def _cli(fleet: DemoFleet) -> dict[str, dict[str, object]]:
    # The same instant as the dashboard's clock: the same store at the same moment, the same figures.
    at = fleet.emu.clock.now().isoformat()
    result = CliRunner().invoke(
        cli_app, ["status", "--json", "--config", str(fleet.config), "--state", str(fleet.state), "--at", at]
    )
    assert result.exit_code == 0, result.output
    return {row["cluster"]: row for row in json.loads(result.output)}


def test_a_stop_that_kept_every_group_is_not_called_stopped(night: DemoFleet) -> None:
    api, cli = _api(night)["p5-training"], _cli(night)["p5-training"]
    for row in (api, cli):
        assert row["state"] == "running", row["state"]
        assert row["usd_per_hour"] and float(str(row["usd_per_hour"])) > 390  # 4 x P5 and the head bill
        assert any("sent nothing" in str(f["text"]) for f in row["flags"])  # type: ignore[attr-defined]


def test_cli_and_api_agree_on_state_billing_and_flags(night: DemoFleet) -> None:
    api, cli = _api(night), _cli(night)
    assert set(api) == set(cli)
    for name in api:
        for key in (
            "state",
            "state_text",
            "usd_per_hour",
            "billing",
            "flags",
            "recorded_sizes",
            "protected",
            "next_transition",
            "wants_now",
            "retry",
            "approval",
        ):
            assert api[name][key] == cli[name][key], (name, key)


def test_a_start_that_came_back_empty_is_not_running_and_a_dead_retry_is_not_promised(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # A start that rolled back for capacity at 0 of N nodes, with a retry whose time has passed while
    # the schedule now wants the cluster stopped (past 21:00 PST): no tick will run it.
    with demo_fleet(Path(tmp_path_factory.mktemp("short")), hours=42.0) as fleet:
        with open_store(str(fleet.state)) as store:
            key = next(k for k in store.list_keys() if k.endswith("/p5-training"))
            record = store.get(key)
            assert record is not None
            now = fleet.emu.clock.now()
            short = record.evolve(
                applied_state="running",
                last_outcomes=[
                    GroupOutcome(group=g, outcome="failed", current=0, target=n)
                    for g, n in {"p5-workers": 4, "controller": 1, "login": 1}.items()
                ],
                retry=RetryState(
                    transition_id="start@x",
                    attempt=1,
                    next_at=now - timedelta(minutes=2),
                    deadline=now + timedelta(hours=2),
                    transition_at=now - timedelta(hours=20),
                ),
            )
            store.put(short, expected_version=record.version)
        api, cli = _api(fleet)["p5-training"], _cli(fleet)["p5-training"]
        for row in (api, cli):
            assert row["state"] == "stopped"  # no node runs
            assert row["wants_now"] == "stopped"
            assert row["retry"] is None  # not promised
            assert row["retry_dropped"] is not None
            texts = " ".join(str(f["text"]) for f in row["flags"])  # type: ignore[attr-defined]
            assert "no retry will run" in texts and "p5-workers 0 of 4" in texts
        assert api["flags"] == cli["flags"]


def test_a_pending_release_of_scarce_gpus_is_attention_with_nodes_and_money(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # Monday afternoon, before p5-training's 21:00 PST stop: a request to release its P5s waits.
    with demo_fleet(Path(tmp_path_factory.mktemp("ask")), hours=36.0) as fleet:
        now = fleet.emu.clock.now()
        with open_store(str(fleet.state)) as store:
            key = next(k for k in store.list_keys() if k.endswith("/p5-training"))
            record = store.get(key)
            assert record is not None and record.snapshot is not None
            asked = Approval(
                id="ask123",
                token_sha256="0" * 64,
                groups=["p5-workers"],
                transition_at=now + timedelta(hours=1),
                asked_at=now,
                expires_at=now + timedelta(hours=1),
            )
            store.put(record.evolve(approvals=[asked]), expected_version=record.version)
        api, cli = _api(fleet)["p5-training"], _cli(fleet)["p5-training"]
        assert api["flags"] == cli["flags"]
        first = api["flags"][0]  # type: ignore[index]
        assert first["kind"] == "approval"
        assert "4 × p5.48xlarge" in first["text"] and "per night" in first["text"], first
        client = TestClient(create_app(fleet.dashboard(TOKEN), allowed_hosts=["testserver"]))
        page = client.get("/").text
        assert "awaits approval" in page  # the Fleet page's attention column, not only the approval page


def test_status_says_its_states_are_the_records_not_live(night: DemoFleet) -> None:
    # status reads the state store only: with AWS unreachable it must not claim "as of <now>".
    at = (night.emu.clock.now() + timedelta(hours=3)).isoformat()
    args = ["status", "--config", str(night.config), "--state", str(night.state), "--at", at]
    result = CliRunner().invoke(cli_app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "as of" not in result.output
    assert "as last recorded" in result.output and "ago" in result.output, result.output
    rows = _cli(night)
    assert all(r["recorded_at"] for r in rows.values())


def test_tonight_follows_a_cluster_started_outside_its_window(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Monday night, g5-dev stopped by its Berlin schedule; Start now brings it up off-window.
    with demo_fleet(Path(tmp_path_factory.mktemp("off")), hours=36.0) as fleet:
        client = TestClient(create_app(fleet.dashboard(TOKEN), allowed_hosts=["testserver"]))
        auth = {"Authorization": f"Bearer {TOKEN}"}
        answer = client.post("/api/clusters/g5-dev/start", json={"by": "ops"}, headers=auth)
        assert answer.json()["kind"] == "sent", answer.text
        row = {r["cluster"]: r for r in client.get("/api/fleet").json()}["g5-dev"]
        assert row["state"] in ("starting", "running")
        tonight = row["tonight"]
        assert "outside its window" in tonight["why"], tonight
        assert "nothing but storage" not in tonight["why"]


def test_tonight_of_a_cluster_whose_stop_kept_everything_names_what_is_kept(night: DemoFleet) -> None:
    tonight = _api(night)["p5-training"]["tonight"]
    assert "scarce capacity" in tonight["why"] and "outside its window" not in tonight["why"], tonight  # type: ignore[index]
