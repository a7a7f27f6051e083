"""The Slurm side of a stop and a start, on an in-memory Slurm and a manual clock."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from hyperpod_scheduler.agent.finder import CheckpointFinder
from hyperpod_scheduler.agent.messages import Intent, NodeSelector
from hyperpod_scheduler.agent.settings import DRAIN_REASON, CheckpointSettings
from hyperpod_scheduler.agent.worker import SlurmSide
from hyperpod_scheduler.slurm.memory import MemorySlurm
from hyperpod_scheduler.slurm.model import SlurmJob

from .fakes import T0, Clock, job, node, stop_intent


def _write_checkpoint(folder: Path, name: str, at: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("weights")
    os.utime(path, (at, at))


def _side(slurm: MemorySlurm, clock: Clock) -> SlurmSide:
    return SlurmSide(slurm, CheckpointFinder(), now=clock.now, sleep=clock.sleep)


def _slurm(*jobs: SlurmJob) -> MemorySlurm:
    nodes = [node("n1", ["gpu"]), node("n2", ["gpu"]), node("n3", ["cpu"])]
    return MemorySlurm(nodes_=nodes, jobs_=list(jobs))


def test_block_policy_blocks_a_job_with_a_stale_checkpoint_and_touches_nothing(shared: Path) -> None:
    _write_checkpoint(shared / "j1", "step-100.pt", (T0 - timedelta(hours=3)).timestamp())
    slurm = _slurm(job("1", "train", ["n1"], f"ckpt:{shared}/j1"))
    verdict = _side(slurm, Clock()).handle(stop_intent(CheckpointSettings(policy="block")))
    assert verdict.decision == "block"
    assert "job 1 (train): stale" in verdict.reason
    assert slurm.changes() == []


def test_block_policy_allows_fresh_jobs_then_drains_and_requeues_when_the_head_survives(shared: Path) -> None:
    _write_checkpoint(shared / "j1", "step-100.pt", (T0 - timedelta(minutes=5)).timestamp())
    slurm = _slurm(job("1", "train", ["n1", "n2"], f"ckpt:{shared}/j1"), job("2", "other", ["n3"]))
    verdict = _side(slurm, Clock()).handle(stop_intent(CheckpointSettings(), requeue=True))
    assert (verdict.decision, verdict.drained, verdict.requeued) == ("allow", ["n1", "n2"], ["1"])
    assert [j.job_id for j in verdict.jobs] == ["1"]  # job 2 runs on a group that stays up
    assert ("drain", "n1,n2", DRAIN_REASON) in slurm.calls


def test_without_a_surviving_head_the_interrupted_jobs_are_listed_for_resubmission(shared: Path) -> None:
    slurm = _slurm(job("7", "train", ["n1"]))
    verdict = _side(slurm, Clock()).handle(stop_intent(CheckpointSettings(policy="force")))
    assert (verdict.decision, verdict.requeued, verdict.resubmit) == ("allow", [], ["7"])
    assert verdict.jobs[0].verdict == "none"
    assert [c[0] for c in slurm.changes()] == ["drain"]


def test_checkpoint_then_stop_signals_and_allows_once_a_checkpoint_newer_than_the_signal_appears(
    shared: Path,
) -> None:
    clock = Clock()
    folder = shared / "j1"
    _write_checkpoint(folder, "old.pt", (T0 - timedelta(hours=2)).timestamp())
    saves = []

    def save_on_signal(job_id: str, signal: str) -> None:
        # The job writes its checkpoint a little after the signal.
        saves.append(signal)
        _write_checkpoint(folder, "new.pt", (clock.at + timedelta(seconds=20)).timestamp())

    slurm = _slurm(job("1", "train", ["n1"], f"ckpt:{folder}"))
    slurm.on_signal = save_on_signal
    settings = CheckpointSettings(policy="checkpoint-then-stop", grace_minutes=5, poll_seconds=10)
    verdict = _side(slurm, clock).handle(stop_intent(settings, requeue=True))
    assert saves == ["USR1"]
    assert ("signal", "1", "USR1", "True") in slurm.calls
    assert verdict.decision == "allow" and verdict.jobs[0].verdict == "fresh"
    assert verdict.signalled == ["1"] and verdict.requeued == ["1"]
    assert clock.at - T0 < timedelta(minutes=5)  # it stopped waiting once the checkpoint was there


def test_checkpoint_then_stop_gives_up_after_the_grace_period_and_reports_the_job(shared: Path) -> None:
    clock = Clock()
    slurm = _slurm(job("1", "train", ["n1"], f"ckpt:{shared}/never"))
    settings = CheckpointSettings(policy="checkpoint-then-stop", grace_minutes=3, poll_seconds=30)
    verdict = _side(slurm, clock).handle(stop_intent(settings))
    assert verdict.decision == "allow"
    assert verdict.jobs[0].verdict == "none" and "without a fresh checkpoint" in verdict.reason
    assert clock.at - T0 >= timedelta(minutes=3)


def test_a_group_whose_nodes_cannot_be_found_blocks_unless_forced() -> None:
    slurm = _slurm()
    groups = {"legacy": NodeSelector()}
    verdict = _side(slurm, Clock()).handle(stop_intent(CheckpointSettings(), groups))
    assert verdict.decision == "block" and "checkpoints.partitions" in verdict.reason
    forced = _side(slurm, Clock()).handle(stop_intent(CheckpointSettings(policy="force"), groups))
    assert forced.decision == "allow"


def test_a_dry_run_audits_but_never_signals_drains_or_requeues(shared: Path) -> None:
    slurm = _slurm(job("1", "train", ["n1"], f"ckpt:{shared}"))
    settings = CheckpointSettings(policy="checkpoint-then-stop")
    verdict = _side(slurm, Clock()).handle(stop_intent(settings, dry_run=True, requeue=True))
    assert verdict.decision == "allow" and verdict.reason.startswith("dry run")
    assert slurm.changes() == []


def test_a_slurm_failure_blocks_the_stop_with_the_reason() -> None:
    slurm = _slurm(job("1", "train", ["n1"]))
    slurm.nodes_ = [node("n1", ["gpu"])]

    def broken() -> list[object]:
        from hyperpod_scheduler.slurm.commands import SlurmError

        raise SlurmError("`squeue` did not answer within 30s (is slurmctld up?)")

    slurm.jobs = broken  # type: ignore[method-assign,assignment]
    verdict = _side(slurm, Clock()).handle(stop_intent(CheckpointSettings(policy="force")))
    assert verdict.decision == "block" and "slurmctld" in verdict.reason


def test_a_start_resumes_only_the_nodes_a_scheduled_stop_drained_and_reports_readiness() -> None:
    slurm = MemorySlurm(
        nodes_=[
            node("n1", ["gpu"], "drained", DRAIN_REASON),
            node("n2", ["gpu"], "drained", "bad GPU (admin)"),
            node("n3", ["gpu"], "idle"),
        ]
    )
    clock = Clock()
    intent = Intent(
        id="s-1",
        cluster="c",
        action="start",
        groups={"gpu": NodeSelector(partition="gpu")},
        expected={"gpu": 3},
        settings=CheckpointSettings(ready_timeout_minutes=1, poll_seconds=20),
        posted_at=T0,
        expires_at=T0 + timedelta(hours=1),
    )
    verdict = _side(slurm, clock).handle(intent)
    assert verdict.resumed == ["n1"]
    assert verdict.ready is False
    assert verdict.readiness["gpu"].usable == 2 and verdict.readiness["gpu"].not_ready == ["n2 (drained)"]
    slurm.resume(["n2"])
    assert _side(slurm, clock).handle(intent).ready is True


def test_the_agent_never_drains_after_the_scheduler_stopped_waiting(shared: Path) -> None:
    clock = Clock()
    slurm = _slurm(job("1", "train", ["n1"], f"ckpt:{shared}/never"))
    settings = CheckpointSettings(policy="checkpoint-then-stop", grace_minutes=10, poll_seconds=30)
    intent = stop_intent(settings, expires_at=T0 + timedelta(minutes=2))
    verdict = _side(slurm, clock).handle(intent)
    assert verdict.decision == "block" and "nothing changed" in verdict.reason
    assert [c[0] for c in slurm.changes()] == ["signal"]
    assert clock.at - T0 < timedelta(minutes=3)  # the grace period was cut short at the expiry
