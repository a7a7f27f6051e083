"""Patched by morning (issue 32): a cluster asleep at zero wakes on the AMI release its policy chose.

Each test runs the engine against the emulator on its virtual clock: the release is published by the
emulator (as AWS would), the AMI change goes out as UpdateClusterSoftware while the cluster is at zero,
and the test checks what a user would see: each group's release after the morning restore, and the
start's history line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from hyperpod_scheduler.app.compose import Context, chain_clients
from hyperpod_scheduler.app.history import sentence
from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.config.model import Policy
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT
from hyperpod_scheduler.engine.approvals import decide
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.engine.images import Release
from hyperpod_scheduler.engine.ref import ClusterRef, ClusterSettings, ImagePolicy
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.guards.capacity import CapacityGuard
from hyperpod_scheduler.notify.channels import message_for
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.conftest import ROLE, START, settle
from tests.sessions import shared_session

NAME = "c1"
FAST = {"provisioning": [300, 360], "ami_setup": [200, 240], "deep_health_check": [1800, 2000]}
CUSTOM_AMI = "ami-0123456789abcdef0"


@dataclass
class Rig:
    emu: Emulator
    client: Any
    store: MemoryStore
    events: Collector

    def releases(self, ref: ClusterRef) -> Sequence[Release]:
        # The emulator's published catalogue, as its control API reports it (GET /_emulator/images).
        out = []
        for r in self.emu.backend.images():
            if r["released"]:
                at = datetime.fromisoformat(r["released_at"]) if r["released_at"] else START - timedelta(days=365)
                out.append(Release(r["version"], at, bool(r["security_update"])))
        return out

    def engine(self, include_protected: bool = True) -> Engine:
        return Engine(
            self.store,
            lambda r: self.client,
            self.emu.clock.now,
            events=self.events,
            sleep=self.emu.advance,
            guards_for=lambda r: [CapacityGuard(r.settings.policy, include_protected)],
            releases=self.releases,
        )

    def releases_now(self) -> dict[str, str | None]:
        d = self.client.describe_cluster(ClusterName=NAME)
        return {g["InstanceGroupName"]: g.get("CurrentImageReleaseVersion") for g in d["InstanceGroups"]}

    def image_ids(self) -> dict[str, str | None]:
        d = self.client.describe_cluster(ClusterName=NAME)
        return {g["InstanceGroupName"]: g.get("CurrentImageId") for g in d["InstanceGroups"]}

    def night(self, ref: ClusterRef, *, publish: str | None = "1.3.0", protect: bool = False) -> Engine:
        """Stop in the evening; AWS publishes a security release at 23:00; it is 07:00 the next morning."""
        engine = self.engine(include_protected=not protect)
        assert engine.act(ref, "stop", transition_id="evening", wait=True, poll_seconds=60).kind == "settled"
        self.emu.advance((START.replace(hour=23) - self.emu.clock.now()).total_seconds())
        if publish:
            self.emu.backend.release_image(publish, security_update=True)
        self.emu.advance((START.replace(hour=7) + timedelta(days=1) - self.emu.clock.now()).total_seconds())
        return engine

    def software_updates(self) -> list[str]:
        return [e.message for e in self.events.events if e.kind == "sent" and "AMI update" in e.message]


@contextmanager
def emulated() -> Iterator[Rig]:
    """The emulator with cluster c1 (controller, gpu and cpu on HyperPod releases, own on a custom AMI)."""
    with running_emulator(virtual_start=START, seed=5, capacity={"timing": FAST}, in_process=True) as emu:
        session = shared_session()
        client = session.client("sagemaker", endpoint_url=emu.endpoint)
        compute = {"gpu": ("ml.g5.12xlarge", 2), "cpu": ("ml.c5.xlarge", 1)}
        lifecycle = {"gpu": {"SourceS3Uri": "s3://sagemaker-demo/lc/", "OnCreate": "on_create.sh"}}
        request = slurm_request(NAME, compute, role=ROLE, lifecycle=lifecycle)
        own = {**next(g for g in request["InstanceGroups"] if g["InstanceGroupName"] == "cpu")}
        request["InstanceGroups"].append({**own, "InstanceGroupName": "own", "ImageId": CUSTOM_AMI})
        request["InstanceGroups"][-1]["SlurmConfig"] = {"NodeType": "Compute", "PartitionNames": ["own"]}
        client.create_cluster(**request)
        settle(emu, client, NAME)
        yield Rig(emu, client, MemoryStore(), Collector())


@pytest.fixture
def rig() -> Iterator[Rig]:
    with emulated() as made:
        yield made


def governed(image: dict[str, Any]) -> ClusterRef:
    policy = Policy(**image)
    settings = ClusterSettings(policy=policy, image=ImagePolicy.of(policy))
    return ref_for(NAME, "us-east-1", account=DEFAULT_ACCOUNT).governed(settings)


def test_a_security_release_published_at_23_is_on_every_security_group_by_the_morning(rig: Rig) -> None:
    ref = governed({"image": "security", "image_groups": {"cpu": "pinned"}, "image_settle_days": 0.25})
    engine = rig.night(ref)
    assert engine.act(ref, "start", transition_id="morning", wait=True, poll_seconds=60).kind == "settled"
    versions = rig.releases_now()
    assert versions["gpu"] == versions["controller"] == "1.3.0"
    assert versions["cpu"] == "1.2.1"  # pinned
    assert rig.image_ids()["own"] == CUSTOM_AMI  # a custom AMI is never changed
    (start,) = [h for h in rig.store.history(ref.key) if h.action == "start"]
    assert start.outcome == "ok"
    updates = start.detail["image_updates"]
    assert [(u["group"], u["from_release"], u["to_release"], u["why"]) for u in updates] == [
        ("controller", "1.2.1", "1.3.0", "security update"),
        ("gpu", "1.2.1", "1.3.0", "security update"),
    ]
    assert "; gpu: AMI 1.2.1 → 1.3.0, security update" in sentence(start).text  # history, dashboard, report
    (told,) = [message_for(e) for e in rig.events.events if e.kind == "image"]  # notified once
    assert told is not None and told.subject == "hyperpod-scheduler: c1: AMI updated"
    assert "gpu: AMI 1.2.1 → 1.3.0, security update" in told.text
    assert "ami_changes" not in start.detail  # our own change is not reported as drift


def test_the_faces_are_told_before_each_update_their_look_would_show_the_cluster_from_before(rig: Rig) -> None:
    # UpdateClusterSoftware left the dashboard's look from before it shown as the cluster now (only
    # UpdateCluster told it): the engine's `changing` hook is told before either is sent.
    ref = governed({"image": "security", "image_settle_days": 0.25})
    engine = rig.night(ref)
    told: list[str] = []
    sent: list[str] = []
    engine.changing = lambda r: told.append(f"changing {r.name} after {len(sent)} calls")
    for op in ("UpdateCluster", "UpdateClusterSoftware"):
        rig.client.meta.events.register(f"before-call.sagemaker.{op}", lambda model, **_: sent.append(model.name))
    assert engine.act(ref, "start", transition_id="morning", wait=True, poll_seconds=60).kind == "settled"
    assert sent == ["UpdateClusterSoftware", "UpdateCluster"]
    assert told == ["changing c1 after 0 calls", "changing c1 after 1 calls"]


def test_a_release_younger_than_the_settling_age_is_not_taken(rig: Rig) -> None:
    ref = governed({"image": "latest"})  # the default settling age: three days
    engine = rig.night(ref)
    assert engine.act(ref, "start", transition_id="morning", wait=True, poll_seconds=60).kind == "settled"
    assert set(rig.releases_now().values()) - {None} == {"1.2.1"}
    assert rig.software_updates() == []


def test_a_release_whose_first_morning_fails_is_rolled_back_the_next_morning(rig: Rig) -> None:
    ref = governed({"image": "security", "image_settle_days": 0.25})
    engine = rig.night(ref)
    calm = rig.emu.backend.capacity
    rig.emu.backend.set_capacity(replace(calm, lifecycle_script_failure_rate=1.0))  # 1.3.0 breaks setup
    result = engine.act(ref, "start", transition_id="morning", wait=True, poll_seconds=60)
    assert result.kind == "failed"
    record = rig.store.get(ref.key)
    assert record is not None and record.images.refused.get("gpu") == ["1.3.0"]
    rig.emu.backend.set_capacity(calm)
    rig.emu.advance(timedelta(days=1).total_seconds())
    assert engine.act(ref, "start", transition_id="next-morning", wait=True, poll_seconds=60).kind == "settled"
    versions = rig.releases_now()
    assert versions["gpu"] == versions["controller"] == versions["cpu"] == "1.2.1"  # the last release it ran well on
    starts = [h for h in rig.store.history(ref.key) if h.action == "start" and h.outcome == "ok"]
    # The cluster rolled back as a whole, so every group on its first morning on 1.3.0 is rolled back.
    assert {(u["group"], u["to_release"], u["why"]) for u in starts[-1].detail["image_updates"]} == {
        (g, "1.2.1", "rolled back") for g in ("controller", "gpu", "cpu")
    }
    # Refused until a person says so: a third morning does not take 1.3.0 again.
    assert engine.act(ref, "stop", transition_id="evening-2", wait=True, poll_seconds=60).kind == "settled"
    rig.emu.advance(timedelta(hours=14).total_seconds())
    assert engine.act(ref, "start", transition_id="morning-3", wait=True, poll_seconds=60).kind == "settled"
    assert rig.releases_now()["gpu"] == "1.2.1"
    # A person says so for gpu (`allow-image c1 gpu`): its next morning takes 1.3.0 again, cpu's does not.
    assert engine.allow_image(ref, "gpu") == ["1.3.0"]
    assert engine.act(ref, "stop", transition_id="evening-3", wait=True, poll_seconds=60).kind == "settled"
    rig.emu.advance(timedelta(hours=14).total_seconds())
    assert engine.act(ref, "start", transition_id="morning-4", wait=True, poll_seconds=60).kind == "settled"
    assert rig.releases_now()["gpu"] == "1.3.0" and rig.releases_now()["cpu"] == "1.2.1"
    assert [h.actor for h in rig.store.history(ref.key) if h.action == "image"] == ["scheduler"]


class Crash(Exception):
    pass


@pytest.mark.parametrize("point", ["after-image-intent", "after-image-send"])
def test_a_run_killed_around_the_ami_update_sends_it_once_and_restores_on_it(
    rig: Rig, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hyperpod_scheduler.engine import crashpoints

    ref = governed({"image_groups": {"gpu": "security"}, "image_settle_days": 0.25})
    engine = rig.night(ref)
    sent: list[str] = []
    rig.client.meta.events.register(
        "before-call.sagemaker.UpdateClusterSoftware", lambda **kw: sent.append(kw["model"].name)
    )

    def crash_at(name: str) -> None:
        if name == point:
            raise Crash(name)

    monkeypatch.setattr(crashpoints, "reached", crash_at)
    with pytest.raises(Crash):
        engine.act(ref, "start", transition_id="morning", wait=True, poll_seconds=60)
    monkeypatch.undo()
    record = rig.store.get(ref.key)
    assert record is not None and [u.to_release for u in record.images.pending] == ["1.3.0"]  # intent first
    rig.emu.advance(120)
    assert engine.act(ref, "start", transition_id="morning", wait=True, poll_seconds=60).kind == "settled"
    assert len(sent) == 1  # the re-run read the cluster: sent once, whichever side of the send it died on
    assert rig.releases_now()["gpu"] == "1.3.0"
    assert rig.releases_now()["cpu"] == "1.2.1"


def test_plan_names_the_ami_change_the_evening_before(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.emu.backend.release_image("1.3.0", security_update=True)
    config = tmp_path / "hyperpod-scheduler.yaml"
    document = {
        "state": str(tmp_path / "state.sqlite"),
        # `plan` reads the wall clock, the emulator its own: no settling age keeps the two apart.
        "defaults": {"policy": {"image": "security", "image_groups": {"cpu": "pinned"}, "image_settle_days": 0}},
        "schedules": {"office": {"windows": ["Mon-Fri 08:00-18:00 UTC"]}},
        "targets": [{"region": "us-east-1", "clusters": [{"name": NAME, "schedule": "office"}]}],
    }
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", rig.emu.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "t")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "t")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    out = CliRunner().invoke(app, ["plan", "--json", "--config", str(config)])
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.output)["clusters"]
    moved = {(u["group"], u["to_release"], u["why"]) for u in row["image_updates"]}
    assert ("gpu", "1.3.0", "security update") in moved
    assert not {g for g, _, _ in moved} & {"cpu", "own"}  # pinned, custom AMI
    assert any("gpu: AMI 1.2.1 → 1.3.0, security update" in w for w in row["warnings"])
    text = CliRunner().invoke(app, ["plan", "--config", str(config)])
    assert "gpu: AMI 1.2.1 → 1.3.0, security update" in text.output


def _scheduled(rig: Rig, tmp_path: Path) -> Context:
    config = tmp_path / "hyperpod-scheduler.yaml"
    document = {
        "state": str(tmp_path / "state.sqlite"),
        "notifications": {"dashboard_url": "https://ops.example/hps"},
        "defaults": {
            "policy": {
                "image": "security",
                "image_settle_days": 0.25,
                "approve_image": True,
                "approval_minutes": 60,
                "keep_slurm_head": False,
            }
        },
        "schedules": {"office": {"windows": ["Mon-Fri 08:00-18:00 UTC"]}},
        "targets": [{"region": "us-east-1", "clusters": [{"name": NAME, "schedule": "office"}]}],
    }
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    return Context(
        load_config(config), rig.store, chain_clients(lambda ref: rig.client), rig.emu.clock.now, events=rig.events
    )


def _tick_until(rig: Rig, ctx: Context, until: datetime) -> None:
    governed = ctx.fleet().governed()
    while rig.emu.clock.now() < until:
        ctx.tick(governed)
        rig.emu.advance(600)
    ctx.tick(governed)


@pytest.mark.parametrize("answer", [None, True])
def test_with_approve_image_an_unanswered_link_keeps_the_group_pinned(
    rig: Rig, tmp_path: Path, answer: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", rig.emu.endpoint)  # the releases: the emulator's catalogue
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    ctx = _scheduled(rig, tmp_path)
    rig.emu.backend.release_image("1.3.0", security_update=True)  # Monday morning: settled by the evening
    _tick_until(rig, ctx, START.replace(hour=17, minute=10))
    asked_for = [e for e in rig.events.events if e.kind == "approval"]
    assert len(asked_for) == 1, [e.message for e in rig.events.events if e.kind in ("error", "note")]
    asked = asked_for[0]
    assert "gpu: AMI 1.2.1 → 1.3.0, security update" in asked.message and asked.private  # the link
    assert "stay pinned" in asked.message
    if answer:
        path, token = asked.private.removeprefix("https://ops.example/hps").split("?t=")
        key = next(k for k in rig.store.list_keys() if k.endswith("/" + NAME))
        decide(rig.store, key, path.rsplit("/", 1)[1], token, True, "alice", rig.emu.clock.now())
    _tick_until(rig, ctx, START.replace(hour=9) + timedelta(days=1))
    assert rig.client.describe_cluster(ClusterName=NAME)["InstanceGroups"][1]["CurrentCount"] == 2
    assert rig.releases_now()["gpu"] == ("1.3.0" if answer else "1.2.1")
    assert rig.releases_now()["own"] is None  # a custom AMI: no release, never asked about
    assert "own" not in asked.detail["groups"]


def test_a_group_kept_up_overnight_is_not_changed(rig: Rig) -> None:
    ref = governed({"image": "security", "image_settle_days": 0.25, "groups": {"cpu": "keep"}})
    engine = rig.night(ref, protect=True)
    assert rig.client.describe_cluster(ClusterName=NAME)["InstanceGroups"][2]["CurrentCount"] == 1  # cpu kept
    assert engine.act(ref, "start", transition_id="morning", wait=True, poll_seconds=60).kind == "settled"
    versions = rig.releases_now()
    assert versions["gpu"] == "1.3.0"
    assert versions["cpu"] == "1.2.1"  # it had nodes doing work all night: no rolling update for it
