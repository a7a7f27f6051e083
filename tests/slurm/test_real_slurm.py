"""Against a real Slurm (scripts/slurm-ci.sh): the block, checkpoint-then-stop and drain paths, with
the agent in between (a thread serving a SQLite channel) and the guard on the scheduler side."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hyperpod_scheduler.agent.channel import open_channel
from hyperpod_scheduler.agent.daemon import serve
from hyperpod_scheduler.agent.messages import Intent, NodeSelector
from hyperpod_scheduler.agent.settings import DRAIN_REASON, CheckpointSettings
from hyperpod_scheduler.agent.worker import SlurmSide
from hyperpod_scheduler.cli.agent import app as agent_app
from hyperpod_scheduler.guards.base import StopContext
from hyperpod_scheduler.guards.checkpoints import ChannelLink, CheckpointGuard
from hyperpod_scheduler.slurm.commands import SubprocessSlurm

from .fakes import view
from .real import ensure_slurm, exclusive, job_field, node_states, submit, wait_for

pytestmark = pytest.mark.real_slurm  # every test here drives the slurm-ci.sh cluster

KEY = "default/us-east-1/ci"


@pytest.fixture
def channel_url(tmp_path: Path) -> Iterator[str]:
    """A SQLite channel with a real agent serving it from a thread for the length of the test."""
    ensure_slurm()
    url = f"sqlite:///{tmp_path}/channel.sqlite"
    stop = threading.Event()
    side = SlurmSide(SubprocessSlurm(), name="agent@ci")
    agent = threading.Thread(target=serve, args=(open_channel(url), side), kwargs={"poll_seconds": 0.1, "stop": stop})
    with exclusive():
        agent.start()
        try:
            yield url
        finally:
            stop.set()
            agent.join()


def _ctx(groups: tuple[str, ...]) -> StopContext:
    v = view(("head", "Controller", None), ("gpu", "Compute", "gpu"), ("cpu", "Compute", "cpu"))
    now = datetime.now(UTC)
    return StopContext(cluster="ci", key=KEY, region="us-east-1", view=v, groups_to_zero=groups, now=now)


def _settings(url: str, **changes: object) -> CheckpointSettings:
    return CheckpointSettings.model_validate(
        {"channel": url, "poll_seconds": 0.2, "agent_timeout_seconds": 30, **changes}
    )


def test_a_job_checkpointing_to_local_storage_blocks_the_stop(
    channel_url: str, shared: Path, request: pytest.FixtureRequest
) -> None:
    local = Path(tempfile.mkdtemp(prefix="hyperpod-local-ckpt-"))  # under /tmp: instance-local
    request.addfinalizer(lambda: shutil.rmtree(local, ignore_errors=True))
    job_id = submit(
        shared, "local-ckpt", local / "run", f"ckpt:{local}/run", partition="gpu", node="node1", periodic=True
    )
    wait_for(lambda: list((local / "run").glob("step-*.pt")), "the job's first (local) checkpoint")

    verdict = CheckpointGuard.for_cluster(_settings(channel_url, policy="block")).before_stop(_ctx(("gpu",)))

    assert verdict.decision == "block"
    assert f"job {job_id} (local-ckpt): none" in verdict.reason and "instance-local" in verdict.reason
    assert job_field(job_id, "JobState") == "RUNNING"
    assert node_states()["node1"][0] in ("allocated", "mixed")  # not drained


def test_checkpoint_then_stop_gets_a_fresh_checkpoint_then_drains_and_requeues(channel_url: str, shared: Path) -> None:
    ckpt = shared / "ckpt"
    job_id = submit(shared, "train", ckpt, f"ckpt:{ckpt}", partition="gpu", node="node1", periodic=False)
    assert not list(ckpt.glob("step-*.pt"))
    asked_at = datetime.now(UTC)

    settings = _settings(channel_url, policy="checkpoint-then-stop", grace_minutes=1)
    verdict = CheckpointGuard.for_cluster(settings, keep_slurm_head=True).before_stop(_ctx(("gpu",)))

    assert verdict.decision == "allow", verdict.reason
    saved = list(ckpt.glob("step-*.pt"))
    assert saved and all(datetime.fromtimestamp(p.stat().st_mtime, UTC) >= asked_at for p in saved)
    (audit,) = verdict.detail["jobs"]
    assert (audit["job_id"], audit["verdict"]) == (job_id, "fresh")
    assert verdict.detail["signalled"] == [job_id] and verdict.detail["requeued"] == [job_id]
    assert job_field(job_id, "Restarts") == "1"
    # A requeued job passes through COMPLETING while its processes are killed.
    wait_for(lambda: job_field(job_id, "JobState") == "PENDING", f"job {job_id} to be pending again")
    states = node_states()
    assert sorted(verdict.detail["drained"]) == ["node1", "node2"]
    assert states["node1"] == ("drained", DRAIN_REASON) and states["node2"] == ("drained", DRAIN_REASON)
    assert states["node3"][0] == "idle"  # the cpu group stays up


def test_force_drains_lists_jobs_to_resubmit_and_a_start_resumes_the_nodes(channel_url: str, shared: Path) -> None:
    job_id = submit(shared, "no-ckpt", shared / "x", "", partition="gpu", node="node2", periodic=False)

    # The controller group goes to zero too: the queue will not survive, so nothing is requeued.
    verdict = CheckpointGuard.for_cluster(_settings(channel_url, policy="force")).before_stop(_ctx(("head", "gpu")))

    assert verdict.decision == "allow"
    assert verdict.detail["resubmit"] == [job_id] and verdict.detail["requeued"] == []
    assert job_field(job_id, "JobState") == "RUNNING"
    assert node_states()["node2"] == ("draining", DRAIN_REASON)

    SubprocessSlurm().signal(job_id, "KILL", batch_only=False)  # the scale-in ends it
    wait_for(lambda: node_states()["node2"][0] == "drained", "node2 to finish draining")
    now = datetime.now(UTC)
    start = Intent(
        id="start-1",
        cluster=KEY,
        action="start",
        groups={"gpu": NodeSelector(partition="gpu")},
        expected={"gpu": 2},
        settings=_settings(channel_url, ready_timeout_minutes=1),
        posted_at=now,
        expires_at=now + timedelta(minutes=5),
    )
    answer = ChannelLink(open_channel(channel_url), poll_seconds=0.2).ask(start)
    assert answer is not None and answer.ready is True, answer
    assert answer.resumed == ["node1", "node2"]
    assert answer.readiness["gpu"].usable == 2
    assert node_states()["node2"] == ("idle", "")


def test_the_agent_command_answers_a_waiting_intent_once(tmp_path: Path, shared: Path) -> None:
    ensure_slurm()
    url = f"sqlite:///{tmp_path}/cli.sqlite"
    with exclusive():
        job_id = submit(shared, "cli", shared / "c", "ckpt:/scratch/run", partition="cpu", node="node3", periodic=False)
        now = datetime.now(UTC)
        intent = Intent(
            id="cli-1",
            cluster=KEY,
            action="stop",
            groups={"cpu": NodeSelector(partition="cpu")},
            settings=CheckpointSettings(),
            posted_at=now,
            expires_at=now + timedelta(minutes=5),
        )
        open_channel(url).post_intent(intent)
        result = CliRunner().invoke(agent_app, ["run", "--channel", url, "--once"])
        assert result.exit_code == 0, result.output
        verdict = json.loads(result.stdout)
        assert verdict["decision"] == "block" and verdict["jobs"][0]["job_id"] == job_id
        assert open_channel(url).read_verdict(KEY).decision == "block"  # type: ignore[union-attr]
