"""The JSON API and pages over the demo fleet (in-process client; the browser tests serve it for real)."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from botocore.stub import Stubber
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from hyperpod_scheduler.app.compose import Context, chain_clients
from hyperpod_scheduler.cli.main import app as cli_app
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.config.model import SCHEDULE_TAG
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.web import create_app, write_html_report
from hyperpod_scheduler.web.grid import SLOTS
from tests.sessions import shared_session
from tests.web.conftest import TOKEN
from tests.web.fleet import DemoFleet

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _client(fleet: DemoFleet, token: str | None = TOKEN) -> TestClient:
    return TestClient(create_app(fleet.dashboard(token), allowed_hosts=["testserver"]))


def _status(fleet: DemoFleet) -> dict[str, dict[str, object]]:
    result = CliRunner().invoke(
        cli_app, ["status", "--json", "--config", str(fleet.config), "--state", str(fleet.state)]
    )
    assert result.exit_code == 0, result.output
    return {row["cluster"]: row for row in json.loads(result.output)}


def test_fleet_lists_every_demo_cluster_with_its_schedule_and_saving(fleet: DemoFleet) -> None:
    rows = {r["cluster"]: r for r in _client(fleet).get("/api/fleet").json()}
    assert set(rows) == set(fleet.names)
    assert rows["g5-dev"]["schedule"] == "berlin-office"
    assert rows["g5-dev"]["state"] == "stopped"  # Monday night after a Berlin office day
    assert rows["trn1-research"]["month_saving_usd"] > 0
    # Scarce P5 capacity is kept, and the Slurm head with it: p5-training saves nothing at night.
    assert rows["p5-training"]["month_saving_usd"] == 0
    p5 = _client(fleet).get("/api/clusters/p5-training").json()
    assert {g["group"] for g in p5["protected_groups"]} == {"p5-workers", "controller", "login"}


def test_cluster_timeline_has_one_row_per_instance_group(fleet: DemoFleet) -> None:
    for name in fleet.names:
        body = _client(fleet).get(f"/api/clusters/{name}").json()
        assert len(body["timeline"]["groups"]) == fleet.group_counts[name]
        assert body["timeline"]["svg"].count('class="group-row"') == fleet.group_counts[name]
    kinds = {s["kind"] for g in body["timeline"]["groups"] for s in g["segments"]}
    assert {"running", "stopped"} <= kinds and kinds & {"planned-running", "planned-stopped"}
    assert body["ready_by"]["lead_minutes"] > 0


def test_unknown_cluster_is_404_with_one_line(fleet: DemoFleet) -> None:
    answer = _client(fleet).get("/api/clusters/nope")
    assert answer.status_code == 404
    # The message names the cluster, never with the request's own value (it is not echoed).
    assert answer.json() == {
        "error": "cluster: (value not shown) is not governed by the config and not in the state store"
    }


def test_actions_are_refused_without_the_token_and_on_a_read_only_dashboard(fleet: DemoFleet) -> None:
    before = _client(fleet).get("/api/clusters/g5-dev").json()["history"]
    assert _client(fleet).post("/api/clusters/g5-dev/stop", json={}).status_code == 401
    wrong = {"Authorization": "Bearer s3cret-token-for-test"}
    assert _client(fleet).post("/api/clusters/g5-dev/hold", json={}, headers=wrong).status_code == 401
    assert _client(fleet, None).post("/api/clusters/g5-dev/hold", json={}, headers=AUTH).status_code == 403
    page = _client(fleet).post("/clusters/g5-dev/actions/start", data={"by": "eve", "token": ""})
    assert page.status_code == 401 and "refused" in page.text
    assert _client(fleet).get("/api/clusters/g5-dev").json()["history"] == before


def test_hold_through_the_api_shows_in_status_and_history(fleet: DemoFleet) -> None:
    until = (fleet.emu.clock.now() + timedelta(days=400)).isoformat()
    answer = _client(fleet).post(
        "/api/clusters/trn1-research/hold", json={"state": "running", "until": until, "by": "ana"}, headers=AUTH
    )
    assert answer.status_code == 200, answer.text
    assert _status(fleet)["trn1-research"]["hold"]["state"] == "running"
    history = _client(fleet).get("/api/clusters/trn1-research").json()["history"]
    assert (history[0]["action"], history[0]["actor"]) == ("hold", "dashboard:ana")
    released = _client(fleet).post("/api/clusters/trn1-research/release", json={"by": "ana"}, headers=AUTH)
    assert released.json()["kind"] == "ok"
    assert _status(fleet)["trn1-research"]["hold"] is None


def test_a_hold_of_no_known_state_says_which_states_there_are(fleet: DemoFleet) -> None:
    # The value sent is not shown back; the values allowed are (they were masked as if sent).
    answer = _client(fleet).post("/api/clusters/g5-dev/hold", json={"state": "exploded"}, headers=AUTH)
    assert answer.status_code == 400
    assert answer.json()["error"] == "state: (value not shown) is not one of running, stopped"


def test_a_hold_until_an_empty_value_is_refused_not_a_hold_until_released(fleet: DemoFleet) -> None:
    # A script's unset variable (`--until "$END"`, {"until": ""}) was a hold until released: never ending.
    before = _status(fleet)["g5-dev"]["hold"]
    answer = _client(fleet).post("/api/clusters/g5-dev/hold", json={"until": " "}, headers=AUTH)
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("until: empty; give an ISO 8601 instant, or leave it out")
    result = CliRunner().invoke(
        cli_app, ["hold", "g5-dev", "--until", "", "--config", str(fleet.config), "--state", str(fleet.state)]
    )
    assert result.exit_code != 0 and "--until: empty" in str(result.exception)
    assert _status(fleet)["g5-dev"]["hold"] == before


def test_a_hold_into_another_year_says_which_year(fleet: DemoFleet) -> None:
    # "held running until Tue 1 Jan 00:00 UTC" for a hold until 2999: the year was dropped.
    answer = _client(fleet).post(
        "/api/clusters/trn1-research/hold", json={"until": "2999-01-01T00:00:00Z", "by": "ana"}, headers=AUTH
    )
    assert answer.status_code == 200, answer.text
    try:
        (held,) = [f["text"] for f in _status(fleet)["trn1-research"]["flags"] if f["kind"] == "held"]  # type: ignore[index]
        assert held.startswith("held running until Tue 1 Jan 2999 00:00 UTC")
        row = next(r for r in _client(fleet).get("/api/fleet").json() if r["cluster"] == "trn1-research")
        assert "until Tue 1 Jan 2999 00:00" in row["tonight"]["why"]
        history = _client(fleet).get("/api/clusters/trn1-research").json()["history"]
        assert "until Tue 1 Jan 2999 00:00 UTC" in history[0]["sentence"]
    finally:
        _client(fleet).post("/api/clusters/trn1-research/release", json={"by": "ana"}, headers=AUTH)


def test_hold_in_the_past_is_a_one_line_400(fleet: DemoFleet) -> None:
    answer = _client(fleet).post("/api/clusters/g5-dev/hold", json={"until": "2020-01-01T00:00Z"}, headers=AUTH)
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("until: (value not shown) is not in the future")


def test_start_now_sends_the_update_and_records_who(fleet: DemoFleet) -> None:
    answer = _client(fleet).post("/api/clusters/g5-dev/start", json={"by": "ops"}, headers=AUTH)
    assert answer.json()["kind"] == "sent", answer.text
    described = fleet.client.describe_cluster(ClusterName="g5-dev")
    assert all(g["TargetCount"] > 0 for g in described["InstanceGroups"])
    history = _client(fleet).get("/api/clusters/g5-dev").json()["history"]
    assert (history[0]["action"], history[0]["actor"]) == ("manual-start", "dashboard:ops")


def test_painting_the_grid_writes_windows_to_the_config(fleet: DemoFleet) -> None:
    grid = [[d < 5 and 24 <= s < 72 for s in range(SLOTS)] for d in range(7)]
    assert _client(fleet).put("/api/schedules/berlin-office", json={"grid": grid}).status_code == 401
    answer = _client(fleet).put("/api/schedules/berlin-office", json={"grid": grid}, headers=AUTH)
    assert answer.json()["windows"] == ["Mon-Fri 06:00-18:00"], answer.text
    saved = yaml.safe_load(fleet.config.read_text())["schedules"]["berlin-office"]
    assert saved == {
        "windows": ["Mon-Fri 06:00-18:00"],
        "timezone": "Europe/Berlin",
        "holidays": "DE-BE",
        "ready_by": True,  # the grid paints windows; the rest of the schedule stays
    }
    assert load_config(fleet.config).schedules["berlin-office"]["windows"] == ["Mon-Fri 06:00-18:00"]
    shown = _client(fleet).get("/api/schedules").json()["schedules"]
    assert next(s for s in shown if s["name"] == "berlin-office")["grid"] == grid
    bad = _client(fleet).put("/api/schedules/berlin-office", json={"grid": [[True]]}, headers=AUTH)
    assert bad.status_code == 400 and "grid: expected 7 rows" in bad.json()["error"]
    for cell in ("on", "yes", 1):  # the schema says booleans: these were taken as true, and saved
        lax = [[False] * (SLOTS - 1) + [cell]] * 7
        refused = _client(fleet).put("/api/schedules/berlin-office", json={"grid": lax}, headers=AUTH)
        assert refused.status_code == 422 and "grid.0.95: Input should be a valid boolean" in refused.json()["error"]
    assert yaml.safe_load(fleet.config.read_text())["schedules"]["berlin-office"]["windows"] == ["Mon-Fri 06:00-18:00"]


def test_grid_form_without_javascript_saves_checked_cells(fleet: DemoFleet) -> None:
    cells = [f"{d}-{s}" for d in range(5) for s in range(28, 84)]
    answer = _client(fleet).post(
        "/schedules/training-hours", data={"cell": cells, "token": TOKEN}, follow_redirects=False
    )
    assert answer.status_code == 303
    assert load_config(fleet.config).schedules["training-hours"]["windows"] == ["Mon-Fri 07:00-21:00"]


@pytest.mark.parametrize("field", ["cell", "token", "tz"])
def test_a_file_sent_for_a_grid_field_is_a_one_line_400(fleet: DemoFleet, field: str) -> None:
    # str() of an upload gave its headers, garbled into the error; the config is left as it was.
    before = fleet.config.read_text()
    fields = {"cell": "0-28", "token": TOKEN, "tz": "UTC"}
    del fields[field]
    answer = _client(fleet).post(
        "/schedules/training-hours",
        data=fields,
        files={field: ("a.txt", b"0-29", "text/plain")},
        follow_redirects=False,
    )
    assert answer.status_code == 400
    assert f"{field}: a file was sent where the form&#39;s text was expected" in answer.text
    assert "content-disposition" not in answer.text.lower() and fleet.config.read_text() == before


def test_pages_render_without_javascript(fleet: DemoFleet) -> None:
    client = _client(fleet)
    assert all(n in client.get("/").text for n in fleet.names)
    cluster = client.get("/clusters/p5-training").text
    assert "<svg" in cluster and "Stop now" in cluster
    assert client.get("/savings").text.count("<svg") == 4  # saving, FSx, kept, cumulative: each its own scale
    assert client.get("/schedules?tz=Asia/Tokyo").text.count('name="cell"') == 7 * SLOTS * 3
    assert client.get("/schedules?tz=Nowhere/Land").status_code == 400
    assert "token" in client.get("/clusters/g5-dev/actions/hold").text


def test_html_report_is_self_contained(fleet: DemoFleet, tmp_path: Path) -> None:
    dash = fleet.dashboard(None)
    config = load_config(fleet.config)
    with open_store(str(fleet.state)) as store:
        ctx = Context(config, store, chain_clients(lambda ref: fleet.client), fleet.emu.clock.now)
        out = write_html_report(ctx, tmp_path / "report.html", None, None, with_fsx=False)
    html = out.read_text()
    dash.close()
    assert all(f'id="c-{n}"' in html for n in fleet.names)
    assert "<style>" in html and "<script" not in html
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing fetched from elsewhere
    artifacts = Path(__file__).resolve().parents[2] / "test-artifacts" / "web"
    artifacts.mkdir(parents=True, exist_ok=True)
    (artifacts / "report.html").write_text(html)  # the shareable file, for a look


def test_cli_dashboard_and_html_report_show_the_same_figures(
    fleet: DemoFleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One computation (app.report.build) behind all three faces, with the same price source.
    until = fleet.emu.clock.now().isoformat()
    since = (fleet.emu.clock.now() - timedelta(days=2)).isoformat()
    for var, value in (
        ("AWS_ENDPOINT_URL", fleet.emu.endpoint),
        ("AWS_ACCESS_KEY_ID", "t"),
        ("AWS_SECRET_ACCESS_KEY", "t"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("XDG_CONFIG_HOME", str(tmp_path)),
    ):
        monkeypatch.setenv(var, value)
    args = ["--config", str(fleet.config), "--state", str(fleet.state), "--since", since, "--until", until]
    cli = CliRunner().invoke(cli_app, ["report", "--json", *args])
    assert cli.exit_code == 0, cli.output
    from_cli = json.loads(cli.output)
    from_api = _client(fleet).get("/api/savings", params={"since": since, "until": until}).json()
    for key in ("clusters", "total", "prices", "nightly", "notes"):
        assert from_api[key] == from_cli[key], key
    assert from_cli["total"]["window"]["saving"] > 0 and from_cli["total"]["window"]["fsx_while_stopped"] > 0
    html = tmp_path / "r.html"
    assert CliRunner().invoke(cli_app, ["report", "--html", str(html), *args]).exit_code == 0
    text = html.read_text()
    for figure in ("saving", "fsx_while_stopped", "kept_cost"):
        assert f"${from_cli['total']['window'][figure]:,.2f}" in text, figure


def test_demo_dashboard_serves_a_finished_demo_run(fleet: DemoFleet, tmp_path: Path) -> None:
    from hyperpod_scheduler.web.demo_serve import demo_dashboard

    state = tmp_path / "state.sqlite"
    state.write_bytes(fleet.state.read_bytes())
    dash = demo_dashboard(fleet.emu, load_config(fleet.config), str(state), None)
    rows = TestClient(create_app(dash, allowed_hosts=["testserver"])).get("/api/fleet").json()
    assert {r["cluster"] for r in rows} == set(fleet.names)
    assert load_config(tmp_path / "hyperpod-scheduler.yaml").targets[0].region == "us-east-1"
    savings = TestClient(create_app(dash, allowed_hosts=["testserver"])).get("/api/savings").json()
    # The demo's FSx, found through the emulator's own S3 and FSx APIs, still bills while stopped.
    assert savings["total"]["window"]["fsx_while_stopped"] > 0
    found = {c["cluster"]: fs["found_by"] for c in savings["clusters"] for fs in c["file_systems"]}
    assert found == {
        "p5-training": ["config", "InstanceStorageConfigs"],
        "trn1-research": ["provisioning_parameters.json"],
        "g5-dev": ["tag"],
    }
    dash.close()


def test_an_aws_failure_is_a_one_line_502_not_a_crash(fleet: DemoFleet, tmp_path: Path) -> None:
    # A tag-selected target needs ListClusters; an emulator that refuses it stands in for missing credentials.
    config = tmp_path / "tagged.yaml"
    config.write_text(
        yaml.safe_dump({"schedules": {"s": "Mon-Fri 08:00-18:00 UTC"}, "targets": [{"tag_selector": True}]})
    )
    dash = fleet.dashboard(TOKEN)
    dash.config_file = str(config)
    dash.client_for = lambda ref: _refusing_client()
    client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
    answer = client.get("/api/fleet")
    assert answer.status_code == 502
    assert answer.json()["error"].startswith("AWS ListClusters failed: AccessDenied")
    assert client.get("/").status_code == 502
    dash.close()


def _refusing_client() -> Any:
    stubbed = shared_session().client("sagemaker", endpoint_url="http://127.0.0.1:9")
    stubber = Stubber(stubbed)
    stubber.add_client_error("list_clusters", "AccessDenied", "no credentials here")
    stubber.activate()
    return stubbed


def test_a_tag_selected_fleet_is_read_once_for_every_page_request(fleet: DemoFleet, tmp_path: Path) -> None:
    # Tag-selected targets: every reading of the fleet is ListClusters and a ListTags per cluster, and a
    # page that read it three times (rows, their status, the summary strip) tripled the calls and latency.
    # Since issue 30 the reading is shared by every request (app.looks): the first reads, the rest none.
    doc = yaml.safe_load(fleet.config.read_text(encoding="utf-8"))
    for entry in doc["targets"][0]["clusters"]:
        arn = fleet.client.describe_cluster(ClusterName=entry["name"])["ClusterArn"]
        fleet.client.add_tags(ResourceArn=arn, Tags=[{"Key": SCHEDULE_TAG, "Value": entry["schedule"]}])
    doc["targets"] = [{"region": doc["targets"][0]["region"], "tag_selector": True}]
    config = tmp_path / "tagged.yaml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    dash = dataclasses.replace(fleet.dashboard(None), config_file=str(config))
    calls: dict[str, int] = {}

    def count(model: Any, **_: Any) -> None:
        calls[model.name] = calls.get(model.name, 0) + 1

    events = fleet.client.meta.events
    for op in ("ListClusters", "ListTags"):
        events.register(f"before-call.sagemaker.{op}", count, unique_id=f"count-{op}")
    try:
        client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
        for i, path in enumerate(("/", "/api/fleet/summary", "/api/fleet", "/?q=dev")):
            calls.clear()
            answer = client.get(path)
            assert answer.status_code == 200, (path, answer.text)
            assert calls == ({"ListClusters": 1, "ListTags": len(fleet.names)} if i == 0 else {}), path
    finally:
        for op in ("ListClusters", "ListTags"):
            events.unregister(f"before-call.sagemaker.{op}", unique_id=f"count-{op}")
    rows = client.get("/api/fleet").json()
    assert {r["cluster"] for r in rows} == set(fleet.names)  # the tags are what governs them here


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        ("x" * 501, "reason: 501 characters, at most 500 allowed"),
        ("ok\x1b[2Jgone", "reason: holds a control character"),
    ],
)
def test_a_hold_reason_too_long_or_with_an_escape_code_is_a_one_line_400_and_no_hold(
    fleet: DemoFleet, reason: str, said: str
) -> None:
    before = _status(fleet)["g5-dev"]["hold"]
    answer = _client(fleet).post(
        "/api/clusters/g5-dev/hold", json={"state": "running", "reason": reason, "by": "ana"}, headers=AUTH
    )
    assert answer.status_code == 400
    assert answer.json()["error"].startswith(said) and "\n" not in answer.json()["error"]
    assert _status(fleet)["g5-dev"]["hold"] == before


def test_who_asks_longer_than_the_history_keeps_is_refused_not_cut(fleet: DemoFleet) -> None:
    # Accepted up to 500 characters and recorded cut to 64 without a word.
    before = _status(fleet)["g5-dev"]["hold"]
    answer = _client(fleet).post("/api/clusters/g5-dev/hold", json={"state": "running", "by": "b" * 65}, headers=AUTH)
    assert answer.status_code == 400 and answer.json()["error"] == "by: 65 characters, at most 64 allowed"
    assert _status(fleet)["g5-dev"]["hold"] == before


def test_a_stop_reason_with_an_escape_code_is_a_one_line_400_and_nothing_is_sent(fleet: DemoFleet) -> None:
    before = _client(fleet).get("/api/clusters/g5-dev").json()["history"]
    answer = _client(fleet).post(
        "/api/clusters/g5-dev/stop", json={"by": "ops", "reason": "\x1b]0;pwned\x07"}, headers=AUTH
    )
    assert answer.status_code == 400 and answer.json()["error"].startswith("reason: holds a control character")
    assert _client(fleet).get("/api/clusters/g5-dev").json()["history"] == before


@pytest.mark.parametrize("action", ["hold", "stop"])
def test_a_by_with_an_escape_code_or_a_line_break_is_a_one_line_400_and_nothing_is_recorded(
    fleet: DemoFleet, action: str
) -> None:
    # `by` goes into the history's actor and every notice of the action, as a reason does: the same check.
    before = _client(fleet).get("/api/clusters/g5-dev").json()["history"]
    body = {"state": "running", "reason": "ok", "by": "eve\x1b[2J\nforged line"}
    answer = _client(fleet).post(f"/api/clusters/g5-dev/{action}", json=body, headers=AUTH)
    assert answer.status_code == 400 and answer.json()["error"].startswith("by: holds a control character")
    assert _client(fleet).get("/api/clusters/g5-dev").json()["history"] == before


@pytest.mark.parametrize(
    "reason",
    [
        "ok\u202egnp.exe",  # a right-to-left override reorders what follows (inputs.text: "Trojan Source")
        "one\u2028two",  # a line separator: two lines to str.splitlines and to most renderers
        "one\x85two",  # NEL, a C1 line break
        "ok\x9b2Jgone",  # CSI, the C1 form of ESC [
    ],
)
def test_a_reason_with_a_unicode_control_character_is_refused_as_an_ascii_one_is(fleet: DemoFleet, reason: str) -> None:
    before = _status(fleet)["g5-dev"]["hold"]
    answer = _client(fleet).post(
        "/api/clusters/g5-dev/hold", json={"state": "running", "reason": reason, "by": "ana"}, headers=AUTH
    )
    assert answer.status_code == 400 and answer.json()["error"].startswith("reason: holds a control character")
    assert _status(fleet)["g5-dev"]["hold"] == before


def test_a_reason_in_any_script_with_an_emoji_is_kept_as_typed(fleet: DemoFleet) -> None:
    answer = _client(fleet).post(
        "/api/clusters/g5-dev/hold",
        json={"state": "running", "reason": "Überstunden 残業 🚀", "by": "ana"},
        headers=AUTH,
    )
    assert answer.status_code == 200
    [line] = _client(fleet).get("/api/clusters/g5-dev").json()["history"][:1]
    assert line["detail"]["reason"] == "Überstunden 残業 🚀"
    released = _client(fleet).post("/api/clusters/g5-dev/release", json={"by": "ana"}, headers=AUTH)
    assert released.status_code == 200  # the module's fleet is shared: leave it as found


def test_savings_up_to_a_date_not_come_yet_count_up_to_now(fleet: DemoFleet) -> None:
    # A stopped cluster's open night counted on to that date was a saving made up and shown as made.
    client = _client(fleet)
    up_to_now = client.get("/api/savings").json()
    later = client.get("/api/savings", params={"until": "2099-01-01T00:00:00Z"})
    assert later.status_code == 200
    assert later.json()["total"] == up_to_now["total"] and later.json()["nightly"] == up_to_now["nightly"]
    assert any(n.startswith("until 2099-01-01T00:00:00+00:00 is later than now") for n in later.json()["notes"])
    ahead = client.get("/api/savings", params={"since": "2099-01-01T00:00:00Z"})
    assert ahead.status_code == 400 and ahead.json()["error"].startswith(
        "since 2099-01-01T00:00:00+00:00 is not before now"
    )
    backwards = client.get("/api/savings", params={"since": "2026-11-20T00:00:00Z", "until": "2026-11-10T00:00:00Z"})
    assert backwards.status_code == 400 and "must be after since" in backwards.json()["error"]
    assert "--" not in backwards.json()["error"]  # the query's own names, not the command line's


def test_an_approval_answer_of_no_known_decision_says_which_there_are(fleet: DemoFleet) -> None:
    answer = _client(fleet).post("/clusters/g5-dev/approvals/x", data={"t": "x", "by": "ana", "decision": "maybe"})
    assert answer.status_code == 400
    assert "decision: (value not shown) is not one of approve, refuse" in answer.text


def test_a_cluster_left_out_of_the_fleet_is_said_on_the_page(fleet: DemoFleet, tmp_path: Path) -> None:
    # A schedule tag no schedule reads: the cluster was left out of the governed fleet without a word (the
    # page named what it left out only while answered from the store, before AWS was read).
    doc = yaml.safe_load(fleet.config.read_text(encoding="utf-8"))
    arns = {
        e["name"]: fleet.client.describe_cluster(ClusterName=e["name"])["ClusterArn"]
        for e in doc["targets"][0]["clusters"]
    }
    for entry in doc["targets"][0]["clusters"]:
        value = "\x1b[2Jnope<b>" if entry["name"] == "g5-dev" else entry["schedule"]
        fleet.client.add_tags(ResourceArn=arns[entry["name"]], Tags=[{"Key": SCHEDULE_TAG, "Value": value}])
    doc["targets"] = [{"region": doc["targets"][0]["region"], "tag_selector": True}]
    config = tmp_path / "tagged.yaml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    try:
        dash = dataclasses.replace(fleet.dashboard(None), config_file=str(config))
        page = TestClient(create_app(dash, allowed_hosts=["testserver"])).get("/")
        assert page.status_code == 200  # g5-dev's row is the store's, of a cluster no schedule governs
        said = page.text.split('id="left-out"', 1)[1].split("</p>", 1)[0]
        assert "Left out of this page: cluster &#39;g5-dev&#39; skipped" in said
        assert "\x1b" not in page.text and "&lt;b&gt;" in said  # shown, not sent
    finally:
        for entry in yaml.safe_load(fleet.config.read_text(encoding="utf-8"))["targets"][0]["clusters"]:
            fleet.client.add_tags(
                ResourceArn=arns[entry["name"]], Tags=[{"Key": SCHEDULE_TAG, "Value": entry["schedule"]}]
            )


def test_a_refused_form_types_back_only_what_a_field_would_take(fleet: DemoFleet) -> None:
    # A wrong token shows the form again with what was typed: an escape code and 100,000 characters came
    # back whole in the reason's value (HTML-escaped, not bounded, not control-escaped).
    hostile = "\x1b[31m" + "r" * 100_000
    page = _client(fleet).post("/clusters/g5-dev/actions/hold", data={"token": "wrong", "by": "ana", "reason": hostile})
    assert page.status_code == 401
    assert "\x1b" not in page.text and "r" * 501 not in page.text and len(page.text) < 60_000
    assert 'value="ana"' in page.text  # what a field would take is typed back, as before
