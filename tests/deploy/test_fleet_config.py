"""Fleet config (targets with accounts) and the per-target jobs the orchestrator queues."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.deploy.fleet_config import parse_fleet_yaml
from hyperpod_scheduler.deploy.jobs import batches, decode_job, encode_job, jobs_for
from hyperpod_scheduler.engine.fleet import Fleet
from hyperpod_scheduler.errors import UsageError
from tests.deploy.conftest import fleet_yaml

T = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)


def test_each_target_becomes_one_self_contained_job() -> None:
    fleet = parse_fleet_yaml(fleet_yaml())
    jobs = jobs_for(fleet, T).jobs
    assert [(j.account, j.region) for j in jobs][:2] == [("111111111111", "us-east-1"), ("111111111111", "eu-west-1")]
    job = jobs[0]
    assert job.role_arn == "arn:aws:iam::111111111111:role/hyperpod-scheduler-spoke"
    assert job.config.schedules == {"office": "Mon-Fri 08:00-18:00 UTC"}
    assert len(job.config.targets) == 1 and job.config.targets[0].tag_selector
    # The engine reads a job's config as it reads a CLI config (eu-west-1 names its one cluster).
    governed = Fleet(jobs[1].config, lambda ref: None).governed()  # type: ignore[arg-type,return-value]
    assert [(g.ref.name, g.ref.region, g.schedule_label) for g in governed] == [("train", "eu-west-1", "office")]
    assert decode_job(encode_job(job)) == job


def test_role_arn_and_spoke_role_name_override_the_default() -> None:
    text = fleet_yaml(("111111111111",), ("us-east-1",)) + "hub: {spoke_role_name: hps}\n"
    assert jobs_for(parse_fleet_yaml(text), T).jobs[0].role_arn == "arn:aws:iam::111111111111:role/hps"
    text = text.replace("    clusters", "    role_arn: arn:aws:iam::111111111111:role/custom\n    clusters")
    assert jobs_for(parse_fleet_yaml(text), T).jobs[0].role_arn == "arn:aws:iam::111111111111:role/custom"


def test_the_default_role_is_in_the_partition_of_the_targets_region() -> None:
    for region, partition in [("us-east-1", "aws"), ("cn-north-1", "aws-cn"), ("us-gov-west-1", "aws-us-gov"),
                              ("us-iso-east-1", "aws-iso"), ("us-isob-east-1", "aws-iso-b")]:  # fmt: skip
        target = f"{{account: '111111111111', region: {region}, schedule: o, clusters: [a]}}"
        text = f"schedules: {{o: 'Mon-Fri 08:00-19:00 UTC'}}\ntargets: [{target}]\n"
        (job,) = jobs_for(parse_fleet_yaml(text), T).jobs
        assert job.role_arn == f"arn:{partition}:iam::111111111111:role/hyperpod-scheduler-spoke", region


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "targets: [{account: '111111111111', region: eu-west-3, role_arn: 'arn:aws:iam::222222222222:role/spoke'}]",
            "targets[0].role_arn: 'arn:aws:iam::222222222222:role/spoke' is in account 222222222222, but the "
            "target's account is 111111111111",
        ),
        (
            "targets: [{account: '111111111111', region: cn-north-1, role_arn: 'arn:aws:iam::111111111111:role/s'}]",
            "targets[0].role_arn: 'arn:aws:iam::111111111111:role/s' is in partition aws, but region cn-north-1 "
            "is in aws-cn",
        ),
        ("targets: [{account: '1', region: us-east-1}]", "targets[0].account: String should match"),
        ("targets: [{account: '111111111111'}]", "targets[0].region: Field required"),
        ("targets: [{account: '111111111111', region: eu-west-3, role_arn: admin}]", "targets[0].role_arn"),
        ("targets: [{account: '111111111111', region: eu-west-3, colour: red}]", "targets[0].colour: Extra inputs"),
        (
            "targets: [{account: '111111111111', region: eu-west-3}, {account: '111111111111', region: eu-west-3}]",
            "targets[1]: account 111111111111 region eu-west-3 is listed twice",
        ),
        ("targets: [", "invalid YAML"),
        ("- a", "expected a mapping"),
    ],
)
def test_bad_fleet_configs_are_one_line_errors_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_fleet_yaml(text)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("body", "message"),
    [("not json", "not JSON"), ('{"format": 1}', "format 1 is not 3"), ('{"account": "1"}', "worker message: ")],
)
def test_a_bad_worker_message_is_a_one_line_error(body: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        decode_job(body)


@settings(deadline=None, max_examples=25)
@given(st.integers(1, 45))
def test_batches_cover_every_job_once_in_tens(n: int) -> None:
    fleet = parse_fleet_yaml(fleet_yaml(tuple(f"{i:012d}" for i in range(n)), ("us-east-1",)))
    groups = batches([(j, encode_job(j)) for j in jobs_for(fleet, T).jobs])
    assert all(1 <= len(g) <= 10 for g in groups)
    assert [j.account for g in groups for j, _ in g] == [f"{i:012d}" for i in range(n)]


FLEET_HEAD = "schedules: {office: Mon-Fri 08:00-18:00 UTC}\ndefaults: {schedule: office}\n"
TARGET = "targets: [{account: '111111111111', region: us-east-1, clusters: [train]"


def _with(target_extra: str = "", top: str = "", defaults: str = "") -> str:
    head = FLEET_HEAD.replace("{schedule: office}", "{schedule: office" + defaults + "}")
    return head + top + TARGET + target_extra + "}]\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # What a worker cannot apply, with what to do instead.
        (_with(", profile: prod"), "targets[0].profile: a worker has no AWS profiles"),
        (_with(top="state: /tmp/x.sqlite\n"), "state: the fleet keeps its state in the hub's table"),
        (_with(top="cost: {fsx: {discover: false}}\n"), "cost: the fleet prices nothing"),
        (_with(defaults=", poll_seconds: 10"), "defaults.poll_seconds: a worker never waits"),
        (_with(defaults=", lease_ttl_seconds: 300"), "defaults.lease_ttl_seconds: 300 is shorter than a worker"),
        (
            _with(", checkpoints: {policy: block}"),
            "targets[0].checkpoints.channel: not set, so the audit would run Slurm's commands inside the Lambda",
        ),
        (
            _with(", checkpoints: {channel: 'sqlite:///var/lib/hps/agent.sqlite'}"),
            "targets[0].checkpoints.channel: 'sqlite:///var/lib/hps/agent.sqlite' is a file only this machine",
        ),
        (
            _with(defaults=", checkpoints: {channel: /fsx/agent.sqlite}"),
            "defaults.checkpoints.channel: '/fsx/agent.sqlite' is a file only this machine",
        ),
        (
            # The defaults (grace 10 min, agent timeout 2 min) may hold a worker 16 min.
            _with(", checkpoints: {channel: 's3://chan/hps'}"),
            "targets[0].checkpoints: the agent may hold a worker 16.0 min at a stop",
        ),
        (
            _with(", checkpoints: {channel: 's3://chan/hps', grace_minutes: 5, agent_timeout_seconds: 60}"),
            "at a start (ready_timeout_minutes 30 + 3 x agent_timeout_seconds 60s)",
        ),
        # The CLI's own checks apply to the fleet too.
        (_with().replace("clusters: [train]", "clusters: [{name: train, schedule: ofice}]"), "clusters[0].schedule"),
        (_with(", checkpoints: {channel: 'memory:'}"), "'memory:' lives in this process's memory"),
    ],
)
def test_settings_a_worker_cannot_honour_are_refused_naming_the_key(text: str, message: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_fleet_yaml(text)
    assert message in str(err.value) and "\n" not in str(err.value), err.value


def test_checkpoints_that_fit_a_worker_run_and_reach_it_are_accepted() -> None:
    fits = "checkpoints: {channel: CHANNEL, grace_minutes: 5, ready_timeout_minutes: 5, agent_timeout_seconds: 60}"
    for channel in ("'s3://chan/hps'", "'dynamodb://hps-state?region=us-east-1'"):
        fleet = parse_fleet_yaml(_with(", " + fits.replace("CHANNEL", channel)))
        assert fleet.targets[0].checkpoints is not None
    # A shorter worker budget is checked as such.
    with pytest.raises(UsageError, match=r"hub\.worker_timeout_seconds 300 less 60s"):
        parse_fleet_yaml(
            _with(", " + fits.replace("CHANNEL", "'s3://c/p'"), top="hub: {worker_timeout_seconds: 300}\n").replace(
                "{schedule: office}", "{schedule: office, lease_ttl_seconds: 600}"
            )
        )


def test_notifications_travel_with_each_job() -> None:
    text = _with(top="notifications: {sns_topic_arn: 'arn:aws:sns:us-east-1:999999999999:hps-alarms'}\n")
    (job,) = jobs_for(parse_fleet_yaml(text), T).jobs
    assert job.config.notifications.sns_topic_arn == "arn:aws:sns:us-east-1:999999999999:hps-alarms"


def test_one_cluster_name_in_two_accounts_is_two_clusters_but_twice_in_one_target_is_refused() -> None:
    two_accounts = """
schedules: {office: "Mon-Fri 08:00-18:00 UTC"}
defaults: {schedule: office}
targets:
  - {account: "111111111111", region: us-east-1, clusters: [train]}
  - {account: "222222222222", region: us-east-1, clusters: [train]}
"""
    assert [t.account for t in parse_fleet_yaml(two_accounts).targets] == ["111111111111", "222222222222"]
    twice = two_accounts.replace(
        'clusters: [train]}\n  - {account: "222222222222"', 'clusters: [train, train]}\n  - {account: "333333333333"'
    )
    with pytest.raises(UsageError) as err:
        parse_fleet_yaml(twice)
    assert "targets[0].clusters[1]: cluster 'train' is already named in targets[0].clusters[0]" in str(err.value)
    assert "\n" not in str(err.value)
