"""The pure checkpoint audit: locations, instance-local storage, freshness, and the settings model."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from hyperpod_scheduler.agent.audit import Located, is_instance_local, judge, locate, nodes_for
from hyperpod_scheduler.agent.messages import NodeSelector
from hyperpod_scheduler.agent.settings import CheckpointSettings, LocationRule

from .fakes import T0, job, node

SETTINGS = CheckpointSettings(
    location="s3://ckpt-bucket/{user}/{job_name}",
    locations=[LocationRule(job="llama-*", location="/fsx/ckpt/{job_name}/{job_id}")],
    local_paths=["/mnt/local-ssd"],
)


@pytest.mark.parametrize(
    ("comment", "name", "expected"),
    [
        ("ckpt:s3://other/run7", "llama-70b", Located("s3://other/run7", "comment")),
        ("team=nlp ckpt:/fsx/x", "eval", Located("/fsx/x", "comment")),
        ("", "llama-70b", Located("/fsx/ckpt/llama-70b/42", "rule")),
        ("", "eval", Located("s3://ckpt-bucket/alice/eval", "default")),
        ("ckpt:", "eval", Located("s3://ckpt-bucket/alice/eval", "default")),
    ],
)
def test_a_jobs_comment_beats_a_rule_which_beats_the_default(comment: str, name: str, expected: Located) -> None:
    assert locate(job("42", name, ["n1"], comment), SETTINGS) == expected


def test_a_job_with_no_configured_location_has_none() -> None:
    assert locate(job("1", "x", ["n1"]), CheckpointSettings()) == Located(None, None)


@pytest.mark.parametrize(
    ("location", "local"),
    [
        ("/opt/dlami/nvme/ckpt", True),
        ("/opt/sagemaker", True),
        ("/tmp/run", True),
        ("/scratch/../scratch/a", True),
        ("/mnt/local-ssd/job", True),
        ("/fsx/ckpt", False),
        ("/tmpfs/ckpt", False),
        ("/fsx/../tmp/x", True),
        ("s3://bucket/tmp", False),
    ],
)
def test_instance_local_paths_are_recognised_by_whole_components(location: str, local: bool) -> None:
    assert is_instance_local(location, SETTINGS) is local


def test_freshness_is_judged_against_max_age_and_the_signal_time() -> None:
    j = job("1", "eval", ["n1"])
    where = Located("/fsx/ckpt", "default")
    settings = CheckpointSettings(max_age_minutes=30)
    assert judge(j, where, T0 - timedelta(minutes=10), T0, settings).verdict == "fresh"
    stale = judge(j, where, T0 - timedelta(minutes=45), T0, settings)
    assert (stale.verdict, stale.age_s) == ("stale", 45 * 60)
    assert judge(j, where, None, T0, settings).verdict == "none"
    since_signal = judge(j, where, T0 - timedelta(minutes=1), T0, settings, since=T0 - timedelta(seconds=30))
    assert since_signal.verdict == "stale" and "since the signal" in since_signal.reason


def test_a_fresh_checkpoint_on_local_nvme_still_counts_as_none() -> None:
    audit = judge(job("1", "x", ["n1"]), Located("/opt/dlami/nvme/c", "comment"), T0, T0, SETTINGS)
    assert audit.verdict == "none" and "instance-local" in audit.reason


def test_groups_map_to_nodes_by_names_or_partition_and_unmapped_groups_are_reported() -> None:
    nodes = [node("n1", ["gpu"]), node("n2", ["gpu"]), node("n3", ["cpu"])]
    groups = {
        "gpu": NodeSelector(partition="gpu"),
        "cpu": NodeSelector(nodes=["n[3-4]"]),
        "legacy": NodeSelector(),
    }
    found, unknown = nodes_for(groups, nodes)
    assert found == {"gpu": ["n1", "n2"], "cpu": ["n3"], "legacy": []}
    assert unknown == ["legacy"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("location", "fsx/ckpt", "must be s3://bucket/prefix or an absolute path"),
        ("location", "s3:///x", "names no bucket"),
        ("location", "/fsx/{cluster}", "template field"),
        ("signal", "USR1; rm", "not a signal name"),
        ("local_paths", ["nvme"], "must be an absolute path"),
        ("policy", "maybe", "block"),
        ("max_age_minutes", 0, "greater than 0"),
    ],
)
def test_bad_settings_are_refused_naming_the_field_and_value(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        CheckpointSettings.model_validate({field: value})


def test_unknown_settings_keys_are_errors() -> None:
    with pytest.raises(ValidationError, match="max_age"):
        CheckpointSettings.model_validate({"max_age": 5})
