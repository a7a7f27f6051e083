"""The fleet seen from an operator's laptop (issue 29 items 8 and 9): ``--config dynamodb://TABLE``.

moto serves the hub's table and STS; each of two accounts has its own emulator, reached only through
the credentials of the role assumed into that account (``FleetWorld.sagemaker_for`` asks STS who the
credentials are), so a command that reached an account any other way would find no cluster there.
"""

from __future__ import annotations

import json
import re
from typing import Any

import boto3
import pytest
from fastapi.testclient import TestClient

from hyperpod_scheduler.cli import fleet_source
from hyperpod_scheduler.cli.dashboard import fleet_sources
from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.deploy.handlers import orchestrator, worker
from hyperpod_scheduler.web import Dashboard, create_app
from tests.deploy.conftest import ACCOUNTS, TABLE, FleetWorld, drain, store
from tests.reliability.cli_inproc import cli

A, B = ACCOUNTS[0], ACCOUNTS[1]
HERE = "us-east-1"
LOCATION = config_store.Location("dynamodb", TABLE)
FLEET = f"dynamodb://{TABLE}?region={HERE}"


def _config(extra: str = "") -> str:
    return (
        "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"
        "defaults: {schedule: office}\n"
        f"targets:\n  - {{account: '{A}', region: {HERE}, clusters: [train]}}\n"
        f"  - {{account: '{B}', region: {HERE}, clusters: [train]}}\n" + extra
    )


@pytest.fixture
def fleet(world: FleetWorld, monkeypatch: pytest.MonkeyPatch) -> FleetWorld:
    # The operator's SageMaker clients go to the account the assumed role is in (its emulator).
    monkeypatch.setattr(fleet_source, "_sagemaker_in", world.sagemaker_for)
    for account in (A, B):
        world.create(account, HERE, "train")
    world.settle([(A, HERE, "train"), (B, HERE, "train")])
    config_store.write_text(LOCATION, _config())
    return world


def _status(*extra: str) -> list[dict[str, Any]]:
    ran = cli("status", "--config", FLEET, "-o", "json", *extra)
    assert ran.code == 0, ran.err
    return list(json.loads(ran.out))


def _tick(world: FleetWorld) -> None:
    runtime = world.runtime()
    orchestrator({}, None, runtime)
    assert worker({"Records": drain(world.queue_url)}, None, runtime) == {"batchItemFailures": []}


def test_status_hold_and_history_run_on_the_hubs_table_and_the_worker_honours_the_hold(fleet: FleetWorld) -> None:
    rows = _status()
    assert sorted((r["cluster"], r["key"].split("/")[0]) for r in rows) == [("train", A), ("train", B)]
    # Two accounts' clusters of one name: the operator picks one by its account.
    ran = cli("hold", "train", "--profile", A, "--reason", "demo at 19:00", "--config", FLEET)
    assert ran.code == 0, ran.err
    record = store().get(f"{A}/{HERE}/train")
    assert record is not None and record.hold is not None  # written to the hub's table
    fleet.advance_to(18, 30)  # the office day is over: both stops are due
    _tick(fleet)
    fleet.settle([(A, HERE, "train"), (B, HERE, "train")])
    assert fleet.updates[(A, HERE, "train")] == 0  # held: the worker left it running
    assert fleet.updates[(B, HERE, "train")] >= 1
    assert sum(fleet.counts(B, HERE, "train").values()) == 0
    assert sum(fleet.counts(A, HERE, "train").values()) > 0
    fleet.advance(60)
    _tick(fleet)  # the next tick sees the stop settled and records it
    ran = cli("history", "train", "--profile", B, "--config", FLEET, "-o", "json")
    assert ran.code == 0, ran.err
    assert "stop" in ran.out  # the worker's stop, read back from the hub's table


def test_the_dashboards_fleet_page_and_api_show_both_accounts(fleet: FleetWorld) -> None:
    dash = Dashboard(source=fleet_sources(FLEET, None))
    with TestClient(create_app(dash, allowed_hosts=["testserver"])) as client:
        listed = client.get("/api/fleet")
        assert listed.status_code == 200, listed.text
        assert sorted(r["key"].split("/")[0] for r in listed.json()) == [A, B]
        page = client.get("/")
        assert page.status_code == 200
        assert 'id="paused"' not in page.text
        assert client.get("/api/fleet/summary").json()["paused"] is None


def test_status_and_the_fleet_page_say_the_fleet_is_paused_by_which_setting(fleet: FleetWorld) -> None:
    config_store.write_text(LOCATION, _config("hub: {paused: true}\n"))
    ran = cli("status", "--config", FLEET)
    assert ran.code == 0, ran.err
    assert "scheduling PAUSED by the fleet config's hub.paused (config version 2) since " in ran.out
    dash = Dashboard(source=fleet_sources(FLEET, None))
    with TestClient(create_app(dash, allowed_hosts=["testserver"])) as client:
        assert "scheduling PAUSED by the fleet config&#39;s hub.paused" in client.get("/").text
        assert client.get("/api/fleet/summary").json()["paused"].startswith("scheduling PAUSED")


def test_a_fleet_view_refuses_another_state_store_in_one_line(fleet: FleetWorld) -> None:
    line = cli("status", "--config", FLEET, "--state", "memory:").one_error_line()
    assert "--state 'memory:'" in line and "hub's table" in line


def test_plan_report_and_release_run_on_the_fleet_too(fleet: FleetWorld) -> None:
    plan = cli("plan", "--config", FLEET, "--no-describe", "-o", "json")
    assert plan.code == 0, plan.err
    steps = json.loads(plan.out)["steps"]
    first = min(st["at"] for st in steps if st["action"] == "stop")
    assert [st["cluster"] for st in steps if st["at"] == first] == ["train", "train"]  # both accounts' clusters
    assert cli("hold", "train", "--profile", B, "--config", FLEET).code == 0
    released = cli("release", "train", "--profile", B, "--config", FLEET)
    assert released.code == 0, released.err
    record = store().get(f"{B}/{HERE}/train")
    assert record is not None and record.hold is None
    report = cli("report", "--config", FLEET)
    assert report.code == 0, report.err


def test_a_table_with_no_pushed_config_is_one_line(world: FleetWorld) -> None:
    line = cli("status", "--config", FLEET).one_error_line()
    assert "nothing stored yet" in line and "config push" in line


def test_the_fleet_dashboard_never_edits_a_local_file_in_place_of_the_pushed_config(
    fleet: FleetWorld, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "hyperpod-scheduler.yaml"  # a file that happens to be where the operator is
    local.write_text("schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n")
    monkeypatch.chdir(tmp_path)
    dash = Dashboard(source=fleet_sources(FLEET, None), token="t0ken-for-the-test")
    grid = [[False] * 96 for _ in range(7)]
    with TestClient(create_app(dash, allowed_hosts=["testserver"])) as client:
        answer = client.put(
            "/api/schedules/office", json={"grid": grid}, headers={"Authorization": "Bearer t0ken-for-the-test"}
        )
    assert answer.status_code == 400 and "config push" in answer.text
    assert local.read_text() == "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\n"


def test_a_target_whose_role_cannot_be_assumed_is_one_line_and_the_other_account_is_still_read(
    fleet: FleetWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hyperpod_scheduler.deploy import credentials
    from hyperpod_scheduler.errors import AwsError

    real = credentials.assume

    def assume(sts: Any, role_arn: str, account: str, region: str) -> Any:
        if account == B:
            raise AwsError(f"account {B}: cannot assume {role_arn}: AccessDenied: not trusted")
        return real(sts, role_arn, account, region)

    monkeypatch.setattr(credentials, "assume", assume)
    ran = cli("plan", "--config", FLEET)  # describes each cluster through its target's role
    assert ran.code == 0 and "Traceback" not in ran.err
    # Each note names its cluster's account (two accounts' `train`).
    said = [line for line in ran.out.splitlines() if line.startswith(f"train (account {A}): ")]
    # Account A was described (what its stop loses is named); B's failure is one line naming its role.
    assert any("zeroes the Slurm controller" in line for line in said)
    assert (
        f"train (account {B}): cannot describe: account {B}: cannot assume "
        f"arn:aws:iam::{B}:role/hyperpod-scheduler-spoke" in ran.out
    )
    for account in (A, B):  # both accounts' clusters are still planned, each row naming its account
        assert re.search(rf"\btrain\s+{account}\s+stop\b", ran.out), ran.out


def test_the_stacks_scheduling_active_no_is_seen_from_the_laptop_as_recorded_by_the_orchestrator(
    fleet: FleetWorld,
) -> None:
    from dataclasses import replace

    from hyperpod_scheduler.deploy import pause_record

    active = fleet.runtime()
    paused = replace(active, scheduling_active=False)  # the stack updated with SchedulingActive=No
    orchestrator({}, None, active)
    ddb = boto3.client("dynamodb", region_name=HERE)
    assert pause_record.read(ddb, TABLE) is None  # never paused: nothing written
    orchestrator({}, None, paused)
    first = fleet.now
    fleet.advance(300)
    orchestrator({}, None, paused)  # still paused: the record keeps its first instant (not rewritten)
    said = (
        "scheduling PAUSED by the stack parameter SchedulingActive=No (as the orchestrator recorded it) "
        f"since {first:%Y-%m-%d %H:%M}Z"
    )
    ran = cli("status", "--config", FLEET)
    assert ran.code == 0, ran.err
    assert said in ran.out
    rows = _status()
    assert {r["paused"] for r in rows} == {said + ": no cluster is stopped or started"}
    dash = Dashboard(source=fleet_sources(FLEET, None))
    with TestClient(create_app(dash, allowed_hosts=["testserver"])) as client:
        assert "scheduling PAUSED by the stack parameter SchedulingActive=No" in client.get("/").text
        assert client.get("/api/fleet/summary").json()["paused"].startswith(said)
    # Both settings: the line names both, since the earlier.
    config_store.write_text(LOCATION, _config("hub: {paused: true}\n"))
    orchestrator({}, None, paused)
    both = cli("status", "--config", FLEET)
    assert "SchedulingActive=No (as the orchestrator recorded it) and the fleet config's hub.paused" in both.out
    # Active again, and the config's pause cleared: the next tick says so and the laptop sees no pause.
    config_store.write_text(LOCATION, _config())
    orchestrator({}, None, active)
    again = cli("status", "--config", FLEET)
    assert again.code == 0 and "PAUSED" not in again.out
    assert {r["paused"] for r in _status()} == {None}


# ---- two accounts' `train` on the dashboard (issue 29: a cluster is account, region and name) ----------

TOKEN = "t0ken-for-the-test"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _at(account: str) -> str:
    return f"account={account}&region={HERE}"


def test_the_dashboard_tells_two_accounts_same_named_clusters_apart_and_acts_on_the_one_asked(
    fleet: FleetWorld,
) -> None:
    dash = Dashboard(source=fleet_sources(FLEET, None), token=TOKEN, now=lambda: fleet.now)
    with TestClient(create_app(dash, allowed_hosts=["testserver"])) as client:
        # The Fleet page links each row to its own cluster, and its buttons act on that one.
        page = client.get("/").text
        for account in (A, B):
            assert f'href="/clusters/train?{_at(account).replace("&", "&amp;")}"' in page
            assert f"/clusters/train/actions/stop?{_at(account).replace('&', '&amp;')}" in page
        rows = {r["key"]: r["where"] for r in client.get("/api/fleet").json()}
        assert rows == {f"{A}/{HERE}/train": _at(A), f"{B}/{HERE}/train": _at(B)}
        # A bare name is refused, naming each choice; an unknown account is a 404.
        for bare in ("/api/clusters/train", "/clusters/train", "/api/clusters/train/preview/stop"):
            answer = client.get(bare)
            assert answer.status_code == 409, (bare, answer.text)
            for account in (A, B):
                said = answer.text.replace("&amp;", "&")  # the HTML page's, or the JSON answer's
                assert f"account {account} region {HERE} (/clusters/train?{_at(account)})" in said
        refused = client.post("/api/clusters/train/hold", json={"reason": "x"}, headers=AUTH)
        assert refused.status_code == 409 and store().get(f"{A}/{HERE}/train") is None
        assert client.get(f"/api/clusters/train?account=333333333333&region={HERE}").status_code == 404
        assert client.get("/api/clusters/train?account=12").status_code == 400
        # Each address reaches its own account's cluster, and its page links stay on it.
        for account in (A, B):
            shown = client.get(f"/api/clusters/train?{_at(account)}").json()
            assert (shown["key"], shown["where"]) == (f"{account}/{HERE}/train", _at(account))
        cluster_page = client.get(f"/clusters/train?{_at(B)}").text
        assert (
            f"account {B}" in cluster_page
            and f"/clusters/train/actions/stop?{_at(B).replace('&', '&amp;')}" in cluster_page
        )
        # Hold A through the API: B has no hold.
        held = client.post(f"/api/clusters/train/hold?{_at(A)}", json={"reason": "demo"}, headers=AUTH)
        assert held.status_code == 200, held.text
        record_a, record_b = store().get(f"{A}/{HERE}/train"), store().get(f"{B}/{HERE}/train")
        assert record_a is not None and record_a.hold is not None
        assert record_b is None or record_b.hold is None
        # Stop B through the confirm page's form: only B's cluster gets an UpdateCluster.
        confirm = client.get(f"/clusters/train/actions/stop?{_at(B)}").text
        assert f'action="/clusters/train/actions/stop?{_at(B).replace("&", "&amp;")}"' in confirm
        preview = client.get(f"/api/clusters/train/preview/stop?{_at(B)}").json()
        assert preview["error"] is None and preview["groups"]
        done = client.post(f"/clusters/train/actions/stop?{_at(B)}", data={"token": TOKEN, "by": "op"})
        assert done.status_code == 200, done.text
        assert f'href="/clusters/train?{_at(B).replace("&", "&amp;")}"' in done.text
        assert fleet.updates[(B, HERE, "train")] >= 1 and fleet.updates[(A, HERE, "train")] == 0
        history_b = store().history(f"{B}/{HERE}/train", limit=10)
        assert any(e.action == "manual-stop" for e in history_b)
        assert not any(e.action == "manual-stop" for e in store().history(f"{A}/{HERE}/train", limit=10))
        # The week's events say which `train` each was (A's hold, B's stop), and link to that one.
        fleet.advance(120)  # past the few seconds the page keeps its rows
        page = client.get("/").text
        assert '<ul class="week">' in page, page[page.find("This week") :][:600]
        week = page.split('<ul class="week">', 1)[1].split("</ul>", 1)[0]
        for account, what in ((A, "held"), (B, "manual")):
            link = f'<a href="/clusters/train?{_at(account).replace("&", "&amp;")}">train</a>'
            line = next((x for x in week.split("<li") if f"flag {what}" in x), "")
            assert link in line and f"(account {account} · {HERE})" in line, (what, line)


def test_an_approval_link_names_the_cluster_only_and_reaches_the_account_that_asked(fleet: FleetWorld) -> None:
    from datetime import timedelta

    from hyperpod_scheduler.engine.approvals import token_hash
    from hyperpod_scheduler.store.records import Approval

    dash = Dashboard(source=fleet_sources(FLEET, None), token=TOKEN, now=lambda: fleet.now)
    with TestClient(create_app(dash, allowed_hosts=["testserver"])) as client:
        for account in (A, B):  # a record for each (a hold, released again)
            assert client.post(f"/api/clusters/train/hold?{_at(account)}", json={}, headers=AUTH).status_code == 200
            assert client.post(f"/api/clusters/train/release?{_at(account)}", json={}, headers=AUTH).status_code == 200
        key = f"{B}/{HERE}/train"
        record = store().get(key)
        assert record is not None
        stop = fleet.now + timedelta(hours=1)
        ask = Approval(id="abc123def456", token_sha256=token_hash("single-use"), groups=["train"],
                       transition_at=stop, asked_at=fleet.now, expires_at=stop)  # fmt: skip
        store().put(record.evolve(approvals=[ask]), expected_version=record.version)
        # The link the notification carried: /clusters/NAME/approvals/ID?t=TOKEN, no account.
        page = client.get("/clusters/train/approvals/abc123def456?t=single-use")
        assert page.status_code == 200, page.text
        assert f'action="/clusters/train/approvals/abc123def456?{_at(B).replace("&", "&amp;")}"' in page.text
        answer = client.post(
            f"/clusters/train/approvals/abc123def456?{_at(B)}",
            data={"t": "single-use", "decision": "approve", "by": "op"},
        )
        assert answer.status_code == 200, answer.text
        approved = store().get(key)
        assert approved is not None and approved.approvals[0].state == "approved"
        other = store().get(f"{A}/{HERE}/train")
        assert other is not None and not other.approvals
        # Asked for under the other account, the same link is not found.
        assert client.get(f"/clusters/train/approvals/abc123def456?{_at(A)}&t=single-use").status_code == 404


def _header(out: str) -> list[str]:
    return next(line for line in out.splitlines() if line.startswith(("WHEN", "CLUSTER"))).split()


def test_plan_and_status_name_each_rows_account_when_the_fleet_spans_several(fleet: FleetWorld) -> None:
    for fmt in ("table", "wide"):
        plan = cli("plan", "--config", FLEET, "--no-describe", "-o", fmt)
        assert plan.code == 0, plan.err
        assert _header(plan.out)[4] == "ACCOUNT" and "REGION" not in _header(plan.out)  # one region
        for account in (A, B):
            assert re.search(rf"\btrain\s+{account}\s+stop\b", plan.out), plan.out
        status = cli("status", "--config", FLEET, "-o", fmt)
        assert _header(status.out)[:2] == ["CLUSTER", "ACCOUNT"], status.out
        assert all(re.search(rf"^train\s+{account}\s", status.out, re.M) for account in (A, B)), status.out
    steps = json.loads(cli("plan", "--config", FLEET, "--no-describe", "-o", "json").out)["steps"]
    assert {(st["account"], st["region"]) for st in steps} == {(A, HERE), (B, HERE)}
    assert {r["account"] for r in _status()} == {A, B}


def test_one_accounts_plan_and_status_stay_as_they_were_and_two_regions_show_the_region(fleet: FleetWorld) -> None:
    one = "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\ndefaults: {schedule: office}\n"
    config_store.write_text(LOCATION, one + f"targets: [{{account: '{A}', region: {HERE}, clusters: [train]}}]\n")
    plan = cli("plan", "--config", FLEET, "--no-describe")
    assert _header(plan.out) == ["WHEN", "(UTC)", "LOCAL", "CLUSTER", "ACTION", "WHY"], plan.out
    status = cli("status", "--config", FLEET)
    assert _header(status.out)[:2] == ["CLUSTER", "STATE"], status.out
    steps = json.loads(cli("plan", "--config", FLEET, "--no-describe", "-o", "json").out)["steps"]
    assert {(st["account"], st["region"]) for st in steps} == {(A, HERE)}  # JSON always says where
    two = f"targets:\n  - {{account: '{A}', region: {HERE}, clusters: [train]}}\n"
    two += f"  - {{account: '{A}', region: eu-west-1, clusters: [train]}}\n"
    config_store.write_text(LOCATION, one + two)
    plan = cli("plan", "--config", FLEET, "--no-describe")
    assert _header(plan.out)[3:6] == ["CLUSTER", "REGION", "ACTION"], plan.out
    assert re.search(r"\btrain\s+eu-west-1\s+stop\b", plan.out) and re.search(r"\btrain\s+us-east-1\s+stop\b", plan.out)
