"""The channel between scheduler and agent (state store, S3), the agent loop, and the guard over them."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_scheduler.agent.channel import ChannelError, S3Channel, StoreChannel, open_channel
from hyperpod_scheduler.agent.daemon import serve, serve_once
from hyperpod_scheduler.agent.finder import CheckpointFinder, FinderError
from hyperpod_scheduler.agent.messages import AgentVerdict
from hyperpod_scheduler.agent.settings import DRAIN_REASON, CheckpointSettings
from hyperpod_scheduler.agent.worker import SlurmSide
from hyperpod_scheduler.guards.base import StopContext
from hyperpod_scheduler.guards.checkpoints import ChannelLink, CheckpointGuard, LocalLink, selectors
from hyperpod_scheduler.slurm.memory import MemorySlurm
from hyperpod_scheduler.store import MemoryStore, SqliteStore

from .fakes import T0, Clock, job, node, stop_intent, view

KEY = "default/us-east-1/c1"


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="chan")
        yield client


def _channels(tmp_path: Path, s3: Any) -> list[Any]:
    return [StoreChannel(MemoryStore()), StoreChannel(SqliteStore(tmp_path / "s.sqlite")), S3Channel("chan", "hp", s3)]


def test_every_channel_carries_intents_and_verdicts_both_ways(tmp_path: Path, s3: Any) -> None:
    for channel in _channels(tmp_path, s3):
        assert channel.read_intent(KEY) is None and channel.clusters() == []
        intent = stop_intent(CheckpointSettings(policy="force"), cluster=KEY)
        channel.post_intent(intent)
        assert channel.read_intent(KEY) == intent and channel.clusters() == [KEY]
        verdict = AgentVerdict(intent_id=intent.id, phase="done", decision="allow", reason="ok", at=T0)
        channel.post_verdict(KEY, verdict)
        channel.post_verdict(KEY, verdict.model_copy(update={"reason": "again"}))
        assert channel.read_verdict(KEY) == verdict.model_copy(update={"reason": "again"})


def test_a_garbled_message_is_a_channel_error_naming_the_object(s3: Any) -> None:
    s3.put_object(Bucket="chan", Key="hp/c1/intent.json", Body=b'{"id": "x"}')
    with pytest.raises(ChannelError, match=r"s3://chan/hp/c1/intent\.json: .*Field required"):
        S3Channel("chan", "hp", s3).read_intent("c1")


def test_open_channel_reads_urls_and_refuses_empty_ones(tmp_path: Path) -> None:
    assert isinstance(open_channel(f"sqlite:///{tmp_path}/c.sqlite"), StoreChannel)
    assert isinstance(open_channel("s3://b/p", s3_client=object()), S3Channel)
    with pytest.raises(Exception, match="names no bucket"):
        open_channel("s3:///p")


def test_the_agent_answers_each_intent_once_and_never_acts_on_an_expired_one() -> None:
    channel = StoreChannel(MemoryStore())
    slurm = MemorySlurm(nodes_=[node("n1", ["gpu"])], jobs_=[job("1", "train", ["n1"])])
    clock = Clock()
    side = SlurmSide(slurm, now=clock.now, sleep=clock.sleep, name="agent@test")
    channel.post_intent(stop_intent(CheckpointSettings(policy="force"), cluster=KEY))
    (verdict,) = serve_once(channel, side)
    assert (verdict.decision, verdict.drained, verdict.agent) == ("allow", ["n1"], "agent@test")
    assert serve_once(channel, side) == []
    channel.post_intent(stop_intent(CheckpointSettings(policy="force"), cluster=KEY, id="i-2", expires_at=T0))
    slurm.calls.clear()
    (expired,) = serve_once(channel, side)
    assert expired.phase == "expired" and slurm.changes() == []


def _ctx(groups: tuple[str, ...] = ("gpu",), dry_run: bool = False) -> StopContext:
    v = view(("head", "Controller", None), ("gpu", "Compute", "gpu"), ("cpu", "Compute", "cpu"))
    return StopContext(
        cluster="c1", key=KEY, region="us-east-1", view=v, groups_to_zero=groups, now=T0, dry_run=dry_run
    )


@pytest.mark.parametrize(("policy", "decision"), [("block", "block"), ("allow", "allow")])
def test_a_silent_agent_is_judged_by_the_silent_agent_policy(policy: str, decision: str) -> None:
    clock = Clock()
    settings = CheckpointSettings.model_validate({"silent_agent": policy, "agent_timeout_seconds": 30})
    link = ChannelLink(StoreChannel(MemoryStore()), now=clock.now, sleep=clock.sleep)
    verdict = CheckpointGuard(settings, link, now=clock.now).before_stop(_ctx())
    assert verdict.decision == decision and "did not answer within 30s" in verdict.reason
    assert timedelta(seconds=30) <= clock.at - T0 < timedelta(seconds=60)


def test_the_guard_gets_the_agents_verdict_through_a_sqlite_channel(tmp_path: Path, shared: Path) -> None:
    (shared / "ckpt").mkdir()
    (shared / "ckpt" / "step-1.pt").write_text("w")
    channel_url = f"sqlite:///{tmp_path}/channel.sqlite"
    slurm = MemorySlurm(nodes_=[node("n1", ["gpu"]), node("n2", ["cpu"])], jobs_=[job("1", "train", ["n1"])])
    stop = threading.Event()
    agent = threading.Thread(
        target=serve, args=(open_channel(channel_url), SlurmSide(slurm)), kwargs={"poll_seconds": 0.05, "stop": stop}
    )
    agent.start()
    try:
        settings = CheckpointSettings(location=f"{shared}/ckpt", channel=channel_url, poll_seconds=0.05)
        guard = CheckpointGuard.for_cluster(settings, keep_slurm_head=True)
        verdict = guard.before_stop(_ctx())
    finally:
        stop.set()
        agent.join()
    assert verdict.decision == "allow"
    assert verdict.detail["drained"] == ["n1"] and verdict.detail["requeued"] == ["1"]


def test_the_guard_runs_in_process_and_sends_the_scheduler_settings_and_dry_run() -> None:
    slurm = MemorySlurm(nodes_=[node("n1", ["gpu"])], jobs_=[job("1", "train", ["n1"], "ckpt:/opt/dlami/nvme/c")])
    guard = CheckpointGuard(CheckpointSettings(), LocalLink(SlurmSide(slurm)))
    verdict = guard.before_stop(_ctx(dry_run=True))
    assert verdict.decision == "block" and "instance-local" in verdict.reason
    assert verdict.detail["jobs"][0]["verdict"] == "none" and slurm.changes() == []


def test_requeue_follows_the_slurm_head() -> None:
    guard = CheckpointGuard(CheckpointSettings(), LocalLink(SlurmSide(MemorySlurm())))
    assert guard.intent_for(_ctx(("gpu",))).requeue is True  # the controller group is not zeroed
    assert guard.intent_for(_ctx(("head", "gpu"))).requeue is False
    kept = CheckpointGuard(CheckpointSettings(), LocalLink(SlurmSide(MemorySlurm())), keep_slurm_head=True)
    assert kept.intent_for(_ctx(("head", "gpu"))).requeue is True
    shared_state = CheckpointGuard(CheckpointSettings(slurmctld_state_shared=True), LocalLink(SlurmSide(MemorySlurm())))
    assert shared_state.intent_for(_ctx(("head", "gpu"))).requeue is True


def test_selectors_skip_head_groups_and_prefer_configured_nodes_then_partitions() -> None:
    v = view(
        ("head", "Controller", None), ("gpu", "Compute", "gpu"), ("cpu", "Compute", "cpu"), ("old", "Compute", None)
    )
    settings = CheckpointSettings(nodes={"cpu": ["ip-10-0-0-[1-2]"]}, partitions={"old": "legacy"})
    chosen = selectors(v, ("head", "gpu", "cpu", "old"), settings)
    assert {g: (s.partition, s.nodes) for g, s in chosen.items()} == {
        "gpu": ("gpu", []),
        "cpu": (None, ["ip-10-0-0-[1-2]"]),
        "old": ("legacy", []),
    }


def test_zeroing_only_head_groups_needs_no_audit() -> None:
    guard = CheckpointGuard(CheckpointSettings(), LocalLink(SlurmSide(MemorySlurm())))
    assert guard.before_stop(_ctx(("head",))).decision == "allow"


def test_the_newest_checkpoint_under_an_s3_prefix_and_a_shared_path(s3: Any, shared: Path) -> None:
    assert CheckpointFinder(lambda: s3).newest("s3://chan/ckpt/run1") is None
    s3.put_object(Bucket="chan", Key="ckpt/run1/", Body=b"")
    s3.put_object(Bucket="chan", Key="ckpt/run1/step-1.pt", Body=b"x")
    newest = CheckpointFinder(lambda: s3).newest("s3://chan/ckpt/run1")
    assert newest is not None and newest.tzinfo is not None
    with pytest.raises(FinderError, match="s3://missing/x: cannot list"):
        CheckpointFinder(lambda: s3).newest("s3://missing/x")
    (shared / "a" / "b").mkdir(parents=True)
    for name, stamp in (("a/old.pt", 1_700_000_000), ("a/b/new.pt", 1_800_000_000)):
        (shared / name).write_text("w")
        os.utime(shared / name, (stamp, stamp))
    found = CheckpointFinder().newest(str(shared))
    assert found is not None and found.timestamp() == 1_800_000_000
    assert CheckpointFinder().newest(str(shared / "nothing-here")) is None


def test_after_start_resumes_drained_compute_nodes_and_reports_readiness_per_group() -> None:
    slurm = MemorySlurm(nodes_=[node("n1", ["gpu"], "drained", DRAIN_REASON), node("n2", ["gpu"]), node("n3", ["cpu"])])
    clock = Clock()
    settings = CheckpointSettings(ready_timeout_minutes=1)
    guard = CheckpointGuard(settings, LocalLink(SlurmSide(slurm, now=clock.now, sleep=clock.sleep)), now=clock.now)
    answer = guard.started(KEY, _ctx().view, {"head": 1, "gpu": 2, "cpu": 2})
    assert answer is not None and answer.resumed == ["n1"]
    assert set(answer.readiness) == {"gpu", "cpu"}  # the head group is not a Slurm compute group
    assert (answer.readiness["gpu"].usable, answer.readiness["cpu"].usable) == (2, 1)
    assert answer.ready is False and "cpu" in answer.reason


def test_a_working_agent_that_never_finishes_counts_as_silent_after_the_intent_expires() -> None:
    clock = Clock()
    channel = StoreChannel(MemoryStore())
    intent = stop_intent(CheckpointSettings(agent_timeout_seconds=30), cluster=KEY, posted_at=clock.at)

    def picked_up_then_hung(seconds: float) -> None:
        if channel.read_verdict(KEY) is None:
            channel.post_verdict(KEY, AgentVerdict(intent_id=intent.id, phase="working", at=clock.at))
        clock.sleep(seconds)

    answer = ChannelLink(channel, now=clock.now, sleep=picked_up_then_hung, poll_seconds=10).ask(intent)
    assert answer is None
    assert clock.at >= intent.expires_at + timedelta(seconds=30)  # well past the pick-up timeout


def test_an_allowed_stop_under_the_block_policy_reads_as_a_passed_audit() -> None:
    # "block: no running jobs ...; drained 1 node(s)" read as a blocked stop in the demo (issue 27 item 10).
    channel = StoreChannel(MemoryStore())
    slurm = MemorySlurm(nodes_=[node("n1", ["gpu"])], jobs_=[])
    clock = Clock()
    side = SlurmSide(slurm, now=clock.now, sleep=clock.sleep, name="agent@test")
    channel.post_intent(stop_intent(CheckpointSettings(policy="block"), cluster=KEY))
    (verdict,) = serve_once(channel, side)
    assert verdict.decision == "allow"
    assert verdict.reason.startswith("audit passed (policy block): no running jobs"), verdict.reason
