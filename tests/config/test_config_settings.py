"""Settings that cannot work together are refused with one line naming both, never accepted quietly."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from hyperpod_scheduler.config.load import parse_config
from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.errors import UsageError

GOOD = {
    "schedules": {"office": "Mon-Fri 08:00-18:00 UTC"},
    "defaults": {"schedule": "office"},
    "targets": [{"region": "us-east-1", "clusters": ["a"]}],
}


def _refused(data: dict[str, Any], *needles: str) -> str:
    with pytest.raises(UsageError) as err:
        parse_config(data, "cfg.yaml")
    message = str(err.value)
    assert "\n" not in message and message.startswith("cfg.yaml: "), message
    for needle in needles:
        assert needle in message, message
    return message


def test_a_good_config_is_accepted() -> None:
    parse_config(GOOD, "cfg.yaml")


@pytest.mark.parametrize(("lease", "poll"), [(30, 30), (10, 30), (0.05, 0.05)])
def test_a_lease_not_longer_than_the_poll_interval_is_refused(lease: float, poll: float) -> None:
    _refused(
        {**GOOD, "defaults": {"lease_ttl_seconds": lease, "poll_seconds": poll}},
        "defaults",
        f"lease_ttl_seconds ({lease:g})",
        f"poll_seconds ({poll:g})",
    )


def test_a_settle_timeout_within_one_poll_is_refused() -> None:
    _refused(
        {**GOOD, "defaults": {"settle_timeout_minutes": 0.5, "poll_seconds": 60}},
        "settle_timeout_minutes (0.5)",
        "poll_seconds (60)",
    )


@pytest.mark.parametrize("backoff", [[0], [-5, 10], [5, 0]])
def test_a_retry_backoff_that_is_not_a_wait_is_refused(backoff: list[float]) -> None:
    _refused({**GOOD, "defaults": {"retry": {"backoff_minutes": backoff}}}, "backoff_minutes")


def test_a_first_retry_after_the_deadline_is_refused() -> None:
    _refused(
        {**GOOD, "defaults": {"retry": {"deadline_minutes": 20, "backoff_minutes": [30, 60]}}},
        "deadline_minutes (20)",
        "30",
    )


@pytest.mark.parametrize(
    ("ready_by", "needles"),
    [
        ({"default_minutes": 200, "max_minutes": 180}, ("default_minutes (200)", "max_minutes (180)")),
        ({"margin_minutes": 180, "max_minutes": 180}, ("margin_minutes (180)", "max_minutes (180)")),
    ],
)
def test_ready_by_settings_that_always_hit_the_cap_are_refused(
    ready_by: dict[str, float], needles: tuple[str, ...]
) -> None:
    _refused({**GOOD, "defaults": {"ready_by": ready_by}}, *needles)


def test_the_same_cluster_named_twice_in_one_region_and_profile_is_refused() -> None:
    data = {
        **GOOD,
        "targets": [
            {"region": "us-east-1", "schedule": "office", "clusters": ["a"]},
            {"region": "us-east-1", "schedule": "never", "clusters": ["b", "a"]},
        ],
    }
    _refused(data, "targets[1].clusters[1]", "'a'", "targets[0].clusters[0]")


def test_one_name_under_two_profiles_is_two_clusters_and_accepted() -> None:
    data = {
        **GOOD,
        "targets": [
            {"region": "us-east-1", "profile": "prod", "clusters": ["train"]},
            {"region": "us-east-1", "profile": "dev", "clusters": ["train"]},
        ],
    }
    parse_config(data, "cfg.yaml")


CHECKPOINTS = {"location": "/fsx/ckpt", "grace_minutes": 20, "agent_timeout_seconds": 120}


def test_a_lease_shorter_than_a_checkpoint_audit_can_take_is_refused() -> None:
    data = {**GOOD, "defaults": {"lease_ttl_seconds": 900, "checkpoints": CHECKPOINTS}}
    _refused(data, "lease_ttl_seconds (900)", "checkpoint audit", "ready_timeout_minutes (30)", "2220")


def test_without_an_explicit_lease_the_default_covers_the_checkpoint_audit() -> None:
    data = {**GOOD, "targets": [{"region": "us-east-1", "clusters": [{"name": "a", "checkpoints": CHECKPOINTS}]}]}
    config = parse_config(data, "cfg.yaml")
    # The longest wait: the readiness check after a start (30 min + 3 agent timeouts), plus a minute.
    assert config.defaults.lease_ttl_seconds >= 30 * 60 + 3 * 120
    assert parse_config(GOOD, "cfg.yaml").defaults.lease_ttl_seconds == 900


def test_a_config_built_in_code_gets_the_same_grown_lease() -> None:
    # The demo and the fleet's jobs build ``Config(...)`` directly: pydantic drops a copy returned from a
    # validator there, so the lease must be grown on the instance itself.
    data = {**GOOD, "targets": [{"region": "us-east-1", "clusters": [{"name": "a", "checkpoints": CHECKPOINTS}]}]}
    assert Config(**data).defaults.lease_ttl_seconds == parse_config(data, "cfg.yaml").defaults.lease_ttl_seconds
    assert Config(**data).defaults.lease_ttl_seconds >= 30 * 60 + 3 * 120


def test_every_refusal_reads_from_a_yaml_file_as_one_line(tmp_path: Any) -> None:
    from hyperpod_scheduler.config.load import load_config

    path = tmp_path / "hyperpod-scheduler.yaml"
    path.write_text(yaml.safe_dump({**GOOD, "defaults": {"lease_ttl_seconds": 5, "poll_seconds": 30}}))
    with pytest.raises(UsageError, match=r"lease_ttl_seconds \(5\).*poll_seconds \(30\)"):
        load_config(path)


@pytest.mark.parametrize("region", ["us-east-1/x", "US-EAST-1", "us-\x1b[31mred", "eu-west-1 ", "mars"])
def test_a_region_that_is_not_an_aws_regions_name_is_refused_naming_the_target(region: str) -> None:
    # 'us-east-1/x' keyed records with a slash too many (a ghost row), 'US-EAST-1' a second record of one
    # cluster, an escape code ended every command blaming the state store.
    message = _refused({**GOOD, "targets": [{"region": region, "clusters": ["a"]}]}, "targets", "region")
    assert "is not an AWS region" in message and "\x1b" not in message


@pytest.mark.parametrize("region", ["us-east-1", "ap-southeast-3", "us-gov-west-1", "cn-north-1", "il-central-1"])
def test_every_shape_of_aws_region_is_accepted(region: str) -> None:
    parse_config({**GOOD, "targets": [{"region": region, "clusters": ["a"]}]}, "cfg.yaml")


@pytest.mark.parametrize("floor", [True, -1, 100_001, 10**23, 1.5, "2", None])
def test_a_group_floor_that_is_not_a_count_of_nodes_is_refused(floor: Any) -> None:
    # `floor: true` was a floor of 1 (a bool is an int to Python); 10**23 was taken and printed back.
    policy = {"groups": {"controller": {"floor": floor}}}
    _refused({**GOOD, "defaults": {"schedule": "office", "policy": policy}}, "group 'controller': floor must be")


def test_a_group_floor_of_a_count_is_accepted() -> None:
    for floor in (0, 1, 100_000, 2.0):
        parse_config({**GOOD, "defaults": {"schedule": "office", "policy": {"groups": {"g": {"floor": floor}}}}}, "c")


@pytest.mark.parametrize("state", ["", "  "])
def test_an_empty_state_is_refused_not_the_default_store(state: str) -> None:
    # A template's unset variable: the default store, where this config's records are not, was used.
    _refused({**GOOD, "state": state}, "state", "empty; leave it out for the default store")
