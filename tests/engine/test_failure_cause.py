"""A start that fails for want of capacity is not a failed AMI morning (issue 32): AWS's words are read
once at the edge (``aws.failures``) into a ``FailureCause``; the release judgement reads that, never the
text. On the emulator: a morning on a new release that rolls back for capacity leaves the release on
trial (a retry may still bring it up); one that fails its lifecycle setup refuses it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_scheduler.aws.failures import FailureCause, cause_of
from hyperpod_scheduler.cluster.view import parse_cluster
from hyperpod_scheduler.engine.ref import ClusterRef
from hyperpod_scheduler.store.outcomes import outcomes_detail, read_outcome
from hyperpod_scheduler.store.records import GroupOutcome
from tests.engine.test_images import Rig, emulated, governed

# What HyperPod answers (hyperpod-facts.md, "Provisioning modes and capacity").
ROLLBACK = "We currently do not have sufficient capacity for the requested instance type(s). Please try again."
EVENT = "We currently do not have sufficient capacity to launch new ml.p5.48xlarge instances. Please try again."


@pytest.fixture
def rig() -> Iterator[Rig]:
    with emulated() as made:
        yield made


@pytest.mark.parametrize("message", [ROLLBACK, EVENT, "InsufficientInstanceCapacity: no ml.g5 in us-east-1a"])
def test_capacity_in_any_of_aws_words_is_capacity(message: str) -> None:
    assert cause_of(message) is FailureCause.CAPACITY


@pytest.mark.parametrize(
    "message",
    [
        "Lifecycle scripts did not run successfully on instance i-0abc (on_create.sh exited 1)",
        "Deep health check failed: NCCL test on ip-10-1-2-3",
        "capacity of /opt/sagemaker is full",  # the word alone is not AWS saying it had no instances
    ],
)
def test_other_failures_are_other(message: str) -> None:
    assert cause_of(message) is FailureCause.OTHER


def test_an_error_code_is_read_and_nothing_said_is_no_cause() -> None:
    assert cause_of(None, "InsufficientInstanceCapacity") is FailureCause.CAPACITY
    assert cause_of(None, "ValidationException") is FailureCause.OTHER
    assert cause_of(None) is None and cause_of("") is None


@given(st.text(max_size=300), st.text(max_size=300))
def test_the_rollback_sentence_anywhere_is_capacity_and_no_text_breaks_the_parser(before: str, after: str) -> None:
    assert cause_of(before + ROLLBACK + after) is FailureCause.CAPACITY
    assert cause_of(before) in (None, FailureCause.OTHER, FailureCause.CAPACITY)
    assert (cause_of(before) is None) == (before == "")


def test_describe_cluster_failure_message_is_parsed_once_into_the_view() -> None:
    base = {"ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc", "ClusterName": "c1"}
    assert parse_cluster({**base, "ClusterStatus": "InService", "InstanceGroups": []}).failure_cause is None
    failed = parse_cluster({**base, "ClusterStatus": "InService", "FailureMessage": ROLLBACK, "InstanceGroups": []})
    assert failed.failure_cause is FailureCause.CAPACITY


def test_the_cause_survives_the_history_line_and_an_unknown_one_is_not_guessed() -> None:
    o = GroupOutcome(group="gpu", outcome="failed", current=0, target=2, detail=ROLLBACK, cause=FailureCause.CAPACITY)
    stored = outcomes_detail([o])["gpu"]
    assert stored["cause"] == "capacity" and read_outcome("gpu", stored) == o
    odd = read_outcome("gpu", {**stored, "cause": "gremlins"})
    assert odd is not None and odd.cause is None


def _start(rig: Rig, ref: ClusterRef, tid: str) -> str:
    return rig.engine().act(ref, "start", transition_id=tid, wait=True, poll_seconds=60).kind


def test_a_new_release_whose_morning_ran_out_of_capacity_stays_on_trial_and_is_kept_next_morning(rig: Rig) -> None:
    ref = governed({"image_groups": {"gpu": "security"}, "image_settle_days": 0.25})
    rig.night(ref)
    calm = rig.emu.backend.capacity
    # No ml.g5.12xlarge to give this morning: the all-or-nothing start rolls back for capacity.
    rig.emu.backend.set_capacity(replace(calm, fail_next_launches={"ml.g5.12xlarge": 100}))
    assert _start(rig, ref, "morning") == "failed"
    record = rig.store.get(ref.key)
    assert record is not None
    assert record.images.trial == {"gpu": "1.3.0"} and not record.images.refused  # not the release's fault
    line = next(h for h in reversed(rig.store.history(ref.key)) if h.action == "start")
    assert line.detail["outcomes"]["gpu"]["cause"] == "capacity"
    rig.emu.backend.set_capacity(calm)
    rig.emu.advance(timedelta(hours=1).total_seconds())
    assert _start(rig, ref, "morning-retry") == "settled"
    assert rig.releases_now()["gpu"] == "1.3.0"  # the release was never refused: the retry is on it
