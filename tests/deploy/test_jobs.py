"""The orchestrator's messages: large targets split, each message with its own schedules, SQS's size limit
checked on the body as it is sent, and every cluster of the account governed by exactly one message."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.deploy.fleet_config import parse_fleet_config
from hyperpod_scheduler.deploy.jobs import (
    BATCH,
    MAX_MESSAGE_BYTES,
    TargetJob,
    batches,
    body_size,
    decode_job,
    encode_job,
    jobs_for,
)
from hyperpod_scheduler.engine.fleet import Fleet
from hyperpod_scheduler.errors import UsageError

T = datetime(2026, 11, 30, 19, 0, tzinfo=UTC)
ACCOUNT = "111111111111"
INLINE = "Mon-Fri 07:00-20:00 UTC"


def fleet(targets: list[dict[str, Any]], **top: Any) -> Any:
    data = {
        "schedules": {"office": "Mon-Fri 08:00-19:00 UTC", "late": "Mon-Fri 10:00-22:00 UTC", "never-used": "always"},
        "defaults": {"schedule": "office"},
        "targets": targets,
        **top,
    }
    return parse_fleet_config(data)


def names(n: int, prefix: str = "c") -> list[str]:
    return [f"{prefix}{i:03d}" for i in range(n)]


def explicit(job: TargetJob) -> list[str]:
    return [e.name for e in job.config.targets[0].clusters]


def test_a_large_target_is_split_and_its_parts_share_its_sagemaker_rate() -> None:
    f = fleet([{"account": ACCOUNT, "region": "us-east-1", "clusters": names(120)}])
    jobs = jobs_for(f, T).jobs
    assert [len(explicit(j)) for j in jobs] == [50, 50, 20]
    assert [n for j in jobs for n in explicit(j)] == names(120)  # each cluster in exactly one message
    assert {j.key for j in jobs} == {f"{ACCOUNT}/us-east-1/{i}of3" for i in range(3)}
    # Three workers may run at once on one account and region: together they keep to its rate.
    assert sum(j.rates.updates_per_second for j in jobs) == pytest.approx(f.hub.sagemaker.updates_per_second)
    assert sum(j.rates.reads_per_second for j in jobs) == pytest.approx(f.hub.sagemaker.reads_per_second)
    assert [j.label for j in jobs][-1] == f"{ACCOUNT}/us-east-1 part 3/3"
    small = fleet([{"account": ACCOUNT, "region": "us-east-1", "clusters": names(3)}], hub={"clusters_per_message": 2})
    assert [explicit(j) for j in jobs_for(small, T).jobs] == [["c000", "c001"], ["c002"]]


def test_each_message_carries_only_the_schedules_its_clusters_name() -> None:
    f = fleet(
        [
            {"account": ACCOUNT, "region": "us-east-1", "clusters": ["a", {"name": "b", "schedule": "late"}]},
            {"account": ACCOUNT, "region": "eu-west-1", "clusters": [{"name": "c", "schedule": INLINE}]},
            {"account": "222222222222", "region": "us-east-1", "tag_selector": True},
        ]
    )
    one, inline, tagged = jobs_for(f, T).jobs
    assert set(one.config.schedules) == {"office", "late"}
    assert set(inline.config.schedules) == {"office"}  # the default; the inline expression needs none
    # A tag may name any schedule, so discovery carries them all.
    assert set(tagged.config.schedules) == {"office", "late", "never-used"}
    for job in (one, inline):  # and the engine still reads each message's config on its own
        governed = Fleet(job.config, lambda ref: None).governed()  # type: ignore[arg-type,return-value]
        assert all(g.schedule is not None for g in governed)


Account = tuple[list[TargetJob], list[str], list[str]]


def _account(n_named: int, n_tagged: int, shards: int, per_message: int) -> Account:
    named = names(n_named, "n")
    tagged = names(n_tagged, "t")
    f = fleet(
        [{"account": ACCOUNT, "region": "us-east-1", "clusters": named, "tag_selector": True, "tag_shards": shards}],
        hub={"clusters_per_message": per_message},
    )
    return jobs_for(f, T).jobs, named, tagged


@settings(deadline=None, max_examples=40)
@given(st.integers(0, 30), st.integers(0, 30), st.integers(1, 5), st.integers(1, 12))
def test_every_cluster_in_the_account_is_governed_by_exactly_one_message(
    n_named: int, n_tagged: int, shards: int, per_message: int
) -> None:
    jobs, named, tagged = _account(n_named, n_tagged, shards, per_message)
    assert len(jobs) == max(-(-n_named // per_message), shards, 1)
    # Every named cluster may also carry the tag: discovery sees every cluster of the account.
    for name in named + tagged:
        owners = [j for j in jobs if j.governs(name, name in explicit(j))]
        discovering = [j for j in jobs if j.config.targets[0].tag_selector or name in explicit(j)]
        mine = [j for j in owners if j in discovering]
        assert len(mine) == 1, (name, [j.key for j in mine])
        if name in named:
            assert name in explicit(mine[0])  # an explicit entry wins over any tag


def test_a_message_over_the_sqs_limit_is_split_finer_and_one_that_never_fits_is_refused(tmp_path: Any) -> None:
    # ~9 KB of policy per cluster: 50 in one message would be far over 256 KiB.
    heavy = {"accept_unknown_members": [f"Member{i:04d}" + "x" * 80 for i in range(100)]}
    clusters = [{"name": n, "policy": heavy} for n in names(60)]
    f = fleet([{"account": ACCOUNT, "region": "us-east-1", "clusters": clusters}])
    fan = jobs_for(f, T)
    assert fan.unqueued == [] and len(fan.jobs) > 2
    assert all(body_size(j) <= MAX_MESSAGE_BYTES for j in fan.jobs)
    assert [n for j in fan.jobs for n in explicit(j)] == names(60)

    huge = {"accept_unknown_members": [f"M{i:05d}" + "y" * 200 for i in range(1400)]}  # one cluster > 256 KiB
    f = fleet(
        [
            {"account": ACCOUNT, "region": "us-east-1", "clusters": [{"name": "fat", "policy": huge}]},
            {"account": ACCOUNT, "region": "eu-west-1", "clusters": ["fine"]},
        ]
    )
    fan = jobs_for(f, T)
    assert [j.region for j in fan.jobs] == ["eu-west-1"]  # the other target still goes
    (bad,) = fan.unqueued
    assert "over SQS's 256 KiB" in bad.why and "\n" not in bad.why
    # `config push` refuses it before any tick meets it.
    text = yaml.safe_dump(
        {"schedules": {"office": "Mon-Fri 08:00-19:00 UTC"}, "defaults": {"schedule": "office"},
         "targets": [{"account": ACCOUNT, "region": "us-east-1", "clusters": [{"name": "fat", "policy": huge}]}]}
    )  # fmt: skip
    with pytest.raises(UsageError, match="over SQS's 256 KiB"):
        config_store.write_text(config_store.Location("s3", "b", "k"), text, client_for=_no_aws)


def _no_aws(service: str, region: str | None) -> Any:
    raise AssertionError(f"{service} called: the config should have been refused first")


def test_a_body_is_measured_in_utf8_bytes_as_sqs_counts_it() -> None:
    # Cluster names are ASCII (the API's pattern); a schedule's name need not be.
    sched = "büro" * 10
    f = fleet(
        [{"account": ACCOUNT, "region": "us-east-1", "clusters": [{"name": "a", "schedule": sched}]}],
        schedules={sched: "Mon-Fri 08:00-19:00 UTC"},
        defaults={},
    )
    (job,) = jobs_for(f, T).jobs
    body = encode_job(job)
    assert body_size(job) == len(body.encode("utf-8")) > len(body)
    assert decode_job(body) == job


@settings(deadline=None, max_examples=60)
@given(st.lists(st.integers(1, 120_000), min_size=0, max_size=40))
def test_batches_keep_to_ten_messages_and_256_kib_and_keep_the_order(sizes: list[int]) -> None:
    f = fleet([{"account": ACCOUNT, "region": "us-east-1", "clusters": ["a"]}])
    (job,) = jobs_for(f, T).jobs
    bodies = [(job, "x" * n) for n in sizes]
    groups = batches(bodies)
    assert [b for g in groups for _, b in g] == [b for _, b in bodies]
    for g in groups:
        assert 1 <= len(g) <= BATCH
        assert sum(len(b) for _, b in g) <= MAX_MESSAGE_BYTES or len(g) == 1
