"""One damaged record never hides the rest of the fleet: `status` and the Fleet page show every other
cluster as usual, say which record is damaged, and `status` exits 1 (docs/state-store.md)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app as cli_app
from hyperpod_scheduler.web import create_app
from tests.web.conftest import TOKEN
from tests.web.fleet import demo_fleet


@pytest.mark.parametrize("damage", ["body = '{bad'", "body = 5", "version = 'abc'"])
def test_a_damaged_record_is_its_own_rows_trouble(tmp_path_factory: pytest.TempPathFactory, damage: str) -> None:
    with demo_fleet(Path(tmp_path_factory.mktemp("damaged")), hours=12) as fleet:
        with sqlite3.connect(fleet.state) as db:
            assert db.execute(f"UPDATE records SET {damage} WHERE key LIKE '%/g5-dev'").rowcount == 1
        at = fleet.emu.clock.now().isoformat()
        args = ["status", "--json", "--config", str(fleet.config), "--state", str(fleet.state), "--at", at]
        result = CliRunner().invoke(cli_app, args)
        assert result.exit_code == 1, result.output  # printed, and a monitor sees it
        rows = {r["cluster"]: r for r in json.loads(result.stdout)}
        assert set(rows) == set(fleet.names)  # before: only "error: state store: record ... is unreadable"
        g5 = rows["g5-dev"]
        assert g5["state"] == "unknown" and g5["flags"][0]["kind"] == "damaged"
        assert "g5-dev' is unreadable" in g5["flags"][0]["text"]
        assert all(rows[n]["state"] in ("running", "stopped") for n in fleet.names if n != "g5-dev")
        page = TestClient(create_app(fleet.dashboard(TOKEN), allowed_hosts=["testserver"]))
        api = {r["cluster"]: r for r in page.get("/api/fleet").json()}
        assert set(api) == set(fleet.names) and api["g5-dev"]["flags"][0]["kind"] == "damaged"
        assert api["g5-dev"]["freshness"]["fresh"] is False  # never "read from AWS" beside unknown figures
        html = page.get("/")
        assert html.status_code == 200 and "is unreadable" in html.text
        common = ["--config", str(fleet.config), "--state", str(fleet.state)]
        planned = CliRunner().invoke(cli_app, ["plan", "--json", *common])
        assert planned.exit_code == 1 and "g5-dev' is unreadable: " in planned.stderr
        assert {s["cluster"] for s in json.loads(planned.stdout)["steps"]} == set(fleet.names)
        reported = CliRunner().invoke(cli_app, ["report", "--json", "--no-fsx", *common])
        assert reported.exit_code == 0, reported.output
        doc = json.loads(reported.stdout)
        assert any("g5-dev' is unreadable" in n and "counted from the history alone" in n for n in doc["notes"])
        assert {c["cluster"] for c in doc["clusters"]} >= set(fleet.names) - {"p5-training"}


def test_a_damaged_record_leaves_the_other_faces_and_the_refresh_as_they_were(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    import dataclasses

    from hyperpod_scheduler.app.looks import Looks

    with demo_fleet(Path(tmp_path_factory.mktemp("damaged-faces")), hours=12) as fleet:
        with sqlite3.connect(fleet.state) as db:
            db.execute("UPDATE records SET body = '{bad' WHERE key LIKE '%/g5-dev'")
        # Refreshes run in the request's own thread here, so what they did is there to see.
        dash = dataclasses.replace(fleet.dashboard(TOKEN), looks=Looks(cold_first=False, spawn=lambda work: work()))
        client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
        for path in ("/schedules", "/api/schedules"):  # before: a 400 naming g5-dev's record, for every schedule
            assert client.get(path).status_code == 200, path
        sent = client.post(
            "/api/clusters/trn1-research/start", json={"by": "t"}, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert sent.status_code == 200, sent.text
        rows = {r["cluster"]: r for r in client.get("/api/fleet").json()}
        # Before: the refresh ended at g5-dev's record, so trn1-research stayed "from the store".
        assert dash.looks.failure is None and rows["trn1-research"]["freshness"]["source"] == "aws"
        out = fleet.state.parent / "report.html"
        common = ["--config", str(fleet.config), "--state", str(fleet.state)]
        html = CliRunner().invoke(cli_app, ["report", "--html", str(out), "--no-fsx", *common])
        assert html.exit_code == 0, html.output
        assert "is unreadable" in out.read_text() and "trn1-research" in out.read_text()


def test_a_damaged_history_entry_hides_no_face_of_the_fleet(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Reports and the dashboard read every cluster's history at once, and the first unreadable entry
    # ended them: the Fleet page, the summary, the Savings page and `report`, while `status` showed it.
    with demo_fleet(Path(tmp_path_factory.mktemp("damaged-history")), hours=36) as fleet:
        with sqlite3.connect(fleet.state) as db:
            damaged = db.execute(
                "UPDATE history SET body = '{bad' WHERE id = (SELECT max(id) FROM history WHERE key LIKE '%/g5-dev')"
            )
            assert damaged.rowcount == 1
        client = TestClient(create_app(fleet.dashboard(TOKEN), allowed_hosts=["testserver"]))
        for path in ("/", "/api/fleet", "/api/fleet/summary", "/savings", "/api/savings"):
            assert client.get(path).status_code == 200, path
        rows = {r["cluster"]: r for r in client.get("/api/fleet").json()}
        assert rows["g5-dev"]["flags"][0]["kind"] == "damaged" and set(rows) == set(fleet.names)
        common = ["--config", str(fleet.config), "--state", str(fleet.state)]
        reported = CliRunner().invoke(cli_app, ["report", "--json", "--no-fsx", *common])
        assert reported.exit_code == 0, reported.output
        notes = json.loads(reported.stdout)["notes"]
        assert any("a history entry for" in n and "left out of the figures" in n for n in notes), notes
