"""Approval before release, end to end on the emulator: a scheduled stop that would release a scarce
group asks first (a notification with a link to the dashboard's confirm page), and releases it only if a
person approved; refused or unanswered, the group is kept; the token answers once and expires at the
stop; who answered, or that nobody did, is in the history."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from hyperpod_scheduler.app.compose import Context, chain_clients
from hyperpod_scheduler.app.looks import Looks
from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.notify.channels import message_for
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.store.base import StateStore
from hyperpod_scheduler.web import create_app
from hyperpod_scheduler.web.service import Dashboard
from tests.engine.conftest import START, settle
from tests.sessions import shared_session

TOKEN = "dash-token-for-approval-tests"
P5 = "ml.p5.48xlarge"


@dataclass
class Rig:
    emu: Emulator
    client: Any
    config: Path
    state: Path
    store: StateStore
    events: Collector

    def context(self) -> Context:
        return Context(
            load_config(self.config),
            self.store,
            chain_clients(lambda ref: self.client),
            self.emu.clock.now,
            events=self.events,
            notify=False,
        )

    def tick_until(self, hour: int, minute: int = 0) -> None:
        ctx = self.context()
        governed = ctx.fleet().governed()
        while (self.emu.clock.now().hour, self.emu.clock.now().minute) < (hour, minute):
            ctx.tick(governed)
            self.emu.advance(300)
        ctx.tick(governed)

    def web(self) -> TestClient:
        dash = Dashboard(
            config_file=str(self.config),
            state=str(self.state),
            token=TOKEN,
            now=self.emu.clock.now,
            client_for=lambda ref: self.client,
            aws=AwsClients(self.emu.endpoint),
            looks=Looks(cold_first=False),  # the fleet read inside the first request: tonight as AWS says it
        )
        return TestClient(create_app(dash, allowed_hosts=["testserver"]))

    def link(self) -> str:
        asked = [e for e in self.events.events if e.kind == "approval" and e.private]
        assert len(asked) == 1, [e.message for e in self.events.events if e.kind == "approval"]
        text = message_for(asked[0])
        assert text is not None and asked[0].private in text.plain()  # the notification carries the link
        return asked[0].private.removeprefix("https://ops.example/hps")

    def history(self, action: str) -> list[Any]:
        key = next(k for k in self.store.list_keys() if k.endswith("/p5"))
        return sorted((h for h in self.store.history(key) if h.action == action), key=lambda h: h.at)

    def gpu(self) -> dict[str, Any]:
        groups = self.client.describe_cluster(ClusterName="p5")["InstanceGroups"]
        return next(g for g in groups if g["InstanceGroupName"] == "gpu")


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    with running_emulator(virtual_start=START, seed=41, in_process=True) as emu:
        session = shared_session()
        client = session.client("sagemaker", endpoint_url=emu.endpoint)
        client.create_cluster(**slurm_request("p5", {"gpu": (P5, 2)}, continuous=True))
        settle(emu, client, "p5")
        # Monday 16:00: two hours before the evening stop.
        emu.advance((START.replace(hour=0, minute=0) + timedelta(days=1, hours=16) - emu.clock.now()).total_seconds())
        config = tmp_path / "hyperpod-scheduler.yaml"
        state = tmp_path / "state.sqlite"
        document = {
            "state": str(state),
            "notifications": {"dashboard_url": "https://ops.example/hps"},
            "defaults": {
                "policy": {"release_scarce_capacity": True, "approve_release": "scarce", "approval_minutes": 60}
            },
            "schedules": {"office": {"windows": ["Mon-Fri 08:00-18:00 UTC"]}},
            "targets": [{"region": "us-east-1", "clusters": [{"name": "p5", "schedule": "office"}]}],
        }
        config.write_text(yaml.safe_dump(document), encoding="utf-8")
        with open_store(str(state)) as store:
            yield Rig(emu, client, config, state, store, Collector())


def _answer(rig: Rig, link: str, decision: str, by: str) -> Any:
    path, token = link.split("?t=")
    return rig.web().post(path, data={"t": token, "by": by, "decision": decision})


def test_an_approved_release_goes_ahead_and_says_who_approved(rig: Rig) -> None:
    rig.tick_until(16, 55)
    assert not [e for e in rig.events.events if e.kind == "approval"]  # not asked before the hour
    rig.tick_until(17, 5)
    link = rig.link()
    shown = rig.web().get("/api/clusters/p5").json()["approval"]
    assert shown["state"] == "pending" and shown["groups"] == ["gpu"] and "token_sha256" not in shown
    page = rig.web().get(link)
    assert page.status_code == 200 and "would release" in page.text and "gpu" in page.text
    assert page.headers["referrer-policy"] == "no-referrer"
    answer = _answer(rig, link, "approve", "alice")
    assert answer.status_code == 200 and "approved by alice" in answer.text
    rig.tick_until(18, 30)
    assert rig.gpu()["TargetCount"] == 0  # released
    outcomes = [(h.outcome, h.actor) for h in rig.history("approval")]
    assert outcomes == [("asked", "scheduler"), ("approved", "dashboard:alice")]


def test_a_refused_release_keeps_the_group_and_says_who_refused(rig: Rig) -> None:
    rig.tick_until(17, 5)
    assert _answer(rig, rig.link(), "refuse", "bob").status_code == 200
    rig.tick_until(18, 30)
    assert rig.gpu()["TargetCount"] == 2  # kept, and its Slurm controller with it
    groups = rig.client.describe_cluster(ClusterName="p5")["InstanceGroups"]
    assert next(g for g in groups if g["InstanceGroupName"] == "controller")["TargetCount"] == 1
    assert [h.outcome for h in rig.history("approval")] == ["asked", "refused"]
    assert "refused by bob" in " ".join(e.message for e in rig.events.events)
    stop = rig.history("stop")[-1]
    assert stop.detail["outcomes"]["gpu"]["outcome"] == "kept"


def test_an_unanswered_request_lapses_at_the_stop_and_the_group_is_kept(rig: Rig) -> None:
    rig.tick_until(17, 5)
    link = rig.link()
    rig.tick_until(18, 30)
    assert rig.gpu()["TargetCount"] == 2
    lines = rig.history("approval")
    assert [h.outcome for h in lines] == ["asked", "lapsed"]
    assert "nobody approved the release by 18:00Z (lapsed)" in " ".join(e.message for e in rig.events.events)
    # The link has expired with its stop: it cannot release anything now.
    late = _answer(rig, link, "approve", "carol")
    assert late.status_code == 409 and "expired" in late.text
    assert "expired" in rig.web().get(link).text
    assert [h.outcome for h in rig.history("approval")] == ["asked", "lapsed"]


def test_a_token_answers_once_and_a_wrong_one_not_at_all(rig: Rig) -> None:
    rig.tick_until(17, 5)
    link = rig.link()
    path, token = link.split("?t=")
    wrong = rig.web().post(path, data={"t": token[:-2] + "xx", "by": "mallory", "decision": "approve"})
    assert wrong.status_code == 409 and "does not match" in wrong.text
    assert _answer(rig, link, "refuse", "bob").status_code == 200
    again = _answer(rig, link, "approve", "alice")
    assert again.status_code == 409 and "already refused by bob" in again.text
    assert [h.outcome for h in rig.history("approval")] == ["asked", "refused"]


def test_the_token_is_never_stored_or_logged_in_clear(rig: Rig) -> None:
    rig.tick_until(17, 5)
    token = rig.link().split("?t=")[1]
    key = next(k for k in rig.store.list_keys() if k.endswith("/p5"))
    record = rig.store.get(key)
    assert record is not None and record.approvals and token not in record.model_dump_json()
    assert all(token not in repr(e.as_dict()) for e in rig.events.events)
    assert all(token not in h.model_dump_json() for h in rig.store.history(key))
    assert re.fullmatch(r"[0-9a-f]{64}", record.approvals[0].token_sha256)


def test_a_stop_asked_for_by_a_person_needs_no_approval(rig: Rig) -> None:
    ctx = rig.context()
    ref = ctx.fleet().governed()[0].ref
    result = ctx.engine().act(ref, "stop", transition_id="manual-1", wait=True, poll_seconds=60)
    assert result.kind == "settled" and rig.gpu()["TargetCount"] == 0


def test_plan_says_which_groups_wait_for_an_approval(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", rig.emu.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "t")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "t")
    out = CliRunner().invoke(app, ["plan", "--json", "--config", str(rig.config), "--state", str(rig.state)])
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.output)["clusters"]
    assert any("releases gpu only with a person's approval (asked 60 min before" in w for w in row["warnings"])


def test_no_approval_is_asked_for_a_stop_a_hold_keeps_from_happening(rig: Rig) -> None:
    ctx = rig.context()
    ref = ctx.fleet().governed()[0].ref
    ctx.engine().set_hold(ref, "running", rig.emu.clock.now() + timedelta(days=1), "demo day")
    rig.tick_until(17, 30)
    assert not [e for e in rig.events.events if e.kind == "approval"]
    assert rig.history("approval") == []


def test_tonight_keeps_a_release_nobody_approved_yet_and_a_persons_stop_releases_it(rig: Rig) -> None:
    # Issue 27: "tonight" is the scheduled stop as the planner and the guards send it. Before anyone
    # approved, that stop keeps the P5s (and bills for them); a Stop now from the dashboard is its own
    # approval, so its preview releases them. Once approved, tonight bills nothing but storage.
    web = rig.web()
    (row,) = web.get("/api/fleet").json()
    tonight = row["tonight"]
    assert tonight["bills"] and "approval" in tonight["why"], tonight
    assert {k["group"]: k["kept_by"] for k in tonight["kept"]}.get("gpu") == "approval"
    preview = web.get("/api/clusters/p5/preview/stop").json()
    assert {g["group"]: g["after"] for g in preview["groups"]}["gpu"] == 0, preview
    rig.tick_until(17, 5)
    assert _answer(rig, rig.link(), "approve", "alice").status_code == 200
    (row,) = rig.web().get("/api/fleet").json()
    assert not row["tonight"]["bills"] and "nothing but storage bills" in row["tonight"]["why"], row["tonight"]


def test_a_stop_now_preview_of_a_held_cluster_says_what_the_stop_does_refused(rig: Rig) -> None:
    # The stop preview said "gpu: to 0, saves $/h" for a cluster held running, and the Stop now it
    # previewed was refused by the engine (the hold would reverse it): the result page then listed
    # "gpu: 4 → 0" for a stop that sent nothing.
    ctx = rig.context()
    ref = ctx.fleet().governed()[0].ref
    ctx.engine().set_hold(ref, "running", rig.emu.clock.now() + timedelta(days=1), "demo day")
    web = rig.web()
    preview = web.get("/api/clusters/p5/preview/stop").json()
    before = rig.gpu()["TargetCount"]
    done = web.post("/clusters/p5/actions/stop", data={"token": TOKEN, "by": "bob"})
    assert done.status_code == 200, done.text
    assert rig.gpu()["TargetCount"] == before > 0  # the engine refused: nothing was sent
    assert preview["outcome"] == "refused" and "held running" in preview["nothing"], preview
    assert all(g["after"] == g["now"] for g in preview["groups"]), preview
    assert preview["usd_per_hour_saved"] == 0, preview
    assert "→ 0" not in done.text, done.text


def test_a_start_now_preview_of_a_cluster_held_stopped_says_the_start_is_refused(rig: Rig) -> None:
    ctx = rig.context()
    ref = ctx.fleet().governed()[0].ref
    assert ctx.engine().act(ref, "stop", transition_id="manual-1", wait=True, poll_seconds=60).kind == "settled"
    ctx.engine().set_hold(ref, "stopped", rig.emu.clock.now() + timedelta(days=1), "budget")
    web = rig.web()
    preview = web.get("/api/clusters/p5/preview/start").json()
    done = web.post("/clusters/p5/actions/start", data={"token": TOKEN, "by": "bob"})
    assert done.status_code == 200 and rig.gpu()["TargetCount"] == 0  # refused: nothing was sent
    assert "held stopped" in preview["nothing"] and all(g["after"] == g["now"] for g in preview["groups"]), preview
    assert "→" not in done.text, done.text
