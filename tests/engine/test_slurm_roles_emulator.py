"""Slurm roles from provisioning_parameters.json, end to end through the composed engine against the
emulator (its S3 holds the file): a cluster built from the aws-samples lifecycle scripts has no
SlurmConfig, and a stop that keeps its P5 workers keeps its controller and login too (issue 26, case 3)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_scheduler.app.compose import Clients, Context
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.conftest import START, settle
from tests.engine.legacy_slurm import BUCKET, PARAMETERS, legacy_group
from tests.sessions import shared_session

REF = ref_for("legacy", "us-east-1", account=DEFAULT_ACCOUNT)


LEGACY = {  # no SlurmConfig, no Orchestrator: the roles are only in the file
    "ClusterName": "legacy",
    "InstanceGroups": [
        legacy_group("controller-machine", "ml.m5.12xlarge", 1),
        legacy_group("login-group", "ml.m5.4xlarge", 1),
        legacy_group("worker-group-1", "ml.p5.48xlarge", 4),
    ],
}


@dataclass
class Rig:
    emu: Emulator
    sagemaker: Any
    s3: Any
    store: MemoryStore
    events: Collector
    reads: Counter[str]
    tmp: Path

    def context(self, policy: dict[str, Any] | None = None) -> Context:
        document = {
            "defaults": {"policy": policy or {}},
            "schedules": {"office": {"windows": ["Mon-Fri 08:00-18:00 UTC"]}},
            "targets": [{"region": "us-east-1", "clusters": [{"name": "legacy", "schedule": "office"}]}],
        }
        path = self.tmp / "hyperpod-scheduler.yaml"
        path.write_text(yaml.safe_dump(document), encoding="utf-8")
        clients = Clients(
            sagemaker=lambda ref: self.sagemaker,
            s3=lambda ref: self.s3,
            sns=lambda region: None,
            pricing=lambda: None,
        )
        return Context(
            load_config(path),
            self.store,
            clients,
            self.emu.clock.now,
            events=self.events,
            sleep=self.emu.advance,  # a wait for the update moves the emulator's clock, not the wall's
            notify=False,
        )

    def stop(self, tid: str, policy: dict[str, Any] | None = None) -> dict[str, int]:
        ctx = self.context(policy)
        ref = _governed(ctx)
        result = ctx.engine().act(ref, "stop", transition_id=tid, wait=True, poll_seconds=60)
        assert result.kind in ("settled", "noop"), result
        return self.targets()

    def start(self, tid: str) -> None:
        ctx = self.context()
        result = ctx.engine().act(_governed(ctx), "start", transition_id=tid, wait=True, poll_seconds=60)
        assert result.kind == "settled", result
        settle(self.emu, self.sagemaker, "legacy")

    def targets(self) -> dict[str, int]:
        answer = settle(self.emu, self.sagemaker, "legacy")
        return {g["InstanceGroupName"]: g["TargetCount"] for g in answer["InstanceGroups"]}

    def notes(self) -> str:
        return "\n".join(e.message for e in self.events.events)


def _governed(ctx: Context) -> Any:
    """The cluster as its config governs it (its own target's policy travels on the reference)."""
    g = ctx.fleet().find("legacy")
    return g.ref if g is not None else REF


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    with running_emulator(virtual_start=START, seed=5, in_process=True) as emu:
        session = shared_session()
        sagemaker = session.client("sagemaker", endpoint_url=emu.endpoint)
        s3 = session.client("s3", endpoint_url=emu.endpoint)
        reads: Counter[str] = Counter()
        s3.meta.events.register("before-call.s3.GetObject", lambda params, **_: reads.update([params["url_path"]]))
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key="src/on_create.sh", Body=b"#!/bin/bash\n")
        sagemaker.create_cluster(**LEGACY)
        settle(emu, sagemaker, "legacy")
        yield Rig(emu, sagemaker, s3, MemoryStore(), Collector(), reads, tmp_path)


def _put_parameters(rig: Rig, body: bytes | None = None) -> None:
    data = json.dumps(PARAMETERS).encode() if body is None else body
    rig.s3.put_object(Bucket=BUCKET, Key="src/provisioning_parameters.json", Body=data)


def test_a_stop_keeping_p5_workers_keeps_the_controller_and_login_named_in_the_file(rig: Rig) -> None:
    _put_parameters(rig)
    after = rig.stop("stop-1")
    assert after == {"controller-machine": 1, "login-group": 1, "worker-group-1": 4}
    notes = rig.notes()
    assert "Slurm roles from provisioning_parameters.json" in notes
    assert "the Slurm controller stays up with the compute group 'worker-group-1'" in notes
    record = rig.store.get(REF.key)
    assert record is not None and record.slurm_roles is not None
    assert record.slurm_roles.roles == {
        "controller-machine": "Controller",
        "login-group": "Login",
        "worker-group-1": "Compute",
    }


def test_the_file_is_read_once_across_two_stops(rig: Rig) -> None:
    _put_parameters(rig)
    rig.stop("stop-1", {"release_scarce_capacity": True})
    rig.start("start-1")
    after = rig.stop("stop-2", {"release_scarce_capacity": True})
    assert after == {"controller-machine": 0, "login-group": 0, "worker-group-1": 0}
    assert sum(rig.reads.values()) == 1, rig.reads
    lines = [h for h in rig.store.history(REF.key) if h.action == "slurm-roles"]
    assert [h.outcome for h in lines] == ["read"]


def test_keep_slurm_head_false_still_zeroes_the_head(rig: Rig) -> None:
    _put_parameters(rig)
    after = rig.stop("stop-1", {"keep_slurm_head": False})
    assert after == {"controller-machine": 0, "login-group": 0, "worker-group-1": 4}


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(None, id="missing"),
        pytest.param(b'{"version": "1.0.0", "controller_group": 7}', id="malformed"),
        pytest.param(b"\xff\xfe not json", id="not-json"),
    ],
)
def test_an_unreadable_file_keeps_the_head_with_the_compute_and_says_why(rig: Rig, body: bytes | None) -> None:
    if body is not None:
        _put_parameters(rig, body)
    after = rig.stop("stop-1")
    assert after == {"controller-machine": 1, "login-group": 1, "worker-group-1": 4}
    notes = rig.notes()
    assert "Slurm roles unknown: s3://sagemaker-lifecycle-legacy/src/provisioning_parameters.json" in notes
    why = {"missing": "NoSuchKey", "malformed": "controller_group is 7", "not-json": "not UTF-8"}
    assert any(w in notes for w in why.values())
    [line] = [h for h in rig.store.history(REF.key) if h.action == "slurm-roles"]
    assert line.outcome == "unknown" and "Slurm roles unknown" in line.detail["reason"]


def test_plan_applies_the_remembered_roles_of_a_cluster_without_slurm_config(rig: Rig) -> None:
    # Issue 26/27: plan read DescribeCluster only, so a cluster whose roles live in
    # provisioning_parameters.json got no head warning and no protected head in plan.
    from hyperpod_scheduler.cli.plan import _protection_rows

    _put_parameters(rig)
    rig.stop("stop-1", {"release_scarce_capacity": True})
    rig.start("start-1")
    ctx = rig.context({"release_scarce_capacity": True, "keep_slurm_head": False})
    governed = ctx.fleet().find("legacy")
    assert governed is not None
    row = _protection_rows(ctx, governed)
    assert any("zeroes the Slurm controller" in w for w in row["warnings"]), row
