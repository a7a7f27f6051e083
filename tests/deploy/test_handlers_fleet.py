"""The Lambda handlers over a fleet of 3 accounts x 2 regions: orchestrator -> SQS -> workers -> emulators."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.deploy.handlers import orchestrator, worker
from hyperpod_scheduler.store.records import cluster_key
from tests.deploy.conftest import ACCOUNTS, REGIONS, SIZES, TABLE, FleetWorld, drain, fleet_yaml, store

TARGETS = [(a, r) for a in ACCOUNTS for r in REGIONS]


def _fleet(world: FleetWorld) -> list[tuple[str, str, str]]:
    clusters = []
    for account, region in TARGETS:
        world.create(account, region, "train")
        clusters.append((account, region, "train"))
        if region == "us-east-1":  # found through its tag, not named in the config
            world.create(account, region, "tagged", tagged=True)
            clusters.append((account, region, "tagged"))
    # An untagged, unnamed cluster the scheduler must leave alone.
    world.create(ACCOUNTS[0], "us-east-1", "stranger")
    world.settle([*clusters, (ACCOUNTS[0], "us-east-1", "stranger")])
    config_store.write_text(config_store.Location("dynamodb", TABLE), fleet_yaml())
    return clusters


def _tick(world: FleetWorld) -> dict[str, object]:
    runtime = world.runtime()
    summary = orchestrator({}, None, runtime)
    records = drain(world.queue_url)
    assert len(records) == summary["targets"] == len(TARGETS)
    answer = worker({"Records": records}, None, runtime)
    assert answer == {"batchItemFailures": []}
    return summary


def test_a_fleet_stops_at_night_and_restores_each_cluster_in_the_morning(world: FleetWorld) -> None:
    clusters = _fleet(world)

    _tick(world)  # 06:00 Monday, outside office hours: every governed cluster is stopped
    assert set(world.updates) == set(clusters)
    world.settle(clusters)
    _tick(world)  # follows the stops to their end
    for c in clusters:
        assert set(world.counts(*c).values()) == {0}, c
    assert world.counts(ACCOUNTS[0], "us-east-1", "stranger") == SIZES

    with store() as s:
        for account, region, name in clusters:
            record = s.get(cluster_key(name, region, account))
            assert record is not None and record.applied_state == "stopped"
            assert record.snapshot is not None
            assert {g: size.count for g, size in record.snapshot.sizes.items()} == SIZES
        assert len(s.list_keys()) == len(clusters)  # one record per (account, region, cluster)

    world.advance_to(8, 5)
    world.updates.clear()
    _tick(world)  # 08:00+: every cluster is started with the sizes it had
    assert set(world.updates) == set(clusters) and set(world.updates.values()) == {1}
    world.settle(clusters)
    _tick(world)
    for c in clusters:
        assert world.counts(*c) == SIZES, c


def test_each_action_is_one_json_line_with_cluster_account_region_and_outcome(world: FleetWorld) -> None:
    clusters = _fleet(world)
    _tick(world)
    lines = world.log_lines()
    sent = [line for line in lines if line.get("outcome") == "sent"]
    assert {(line["account"], line["region"], line["cluster"]) for line in sent} == set(clusters)
    metrics = [line for line in lines if "Actions" in line]
    assert {(m["Account"], m["Region"]) for m in metrics} == set(TARGETS)
    for m in metrics:
        spec = m["_aws"]["CloudWatchMetrics"][0]
        # Fleet-wide (the alarms) and per region; per account only when hub.metrics_per_account says so.
        assert spec["Dimensions"] == [[], ["Region"]]
        assert {x["Name"] for x in spec["Metrics"]} >= {"Actions", "Failures", "Shortfalls", "SavedInstances"}
        expected = 2 if m["Region"] == "us-east-1" else 1
        assert m["Actions"] == expected and m["Failures"] == 0

    world.settle(clusters)
    world.out.clear()
    _tick(world)  # the stops settle: now the scheduler keeps 6 instances per cluster off
    saved = {(m["Account"], m["Region"]): m["SavedInstances"] for m in world.log_lines() if "Actions" in m}
    assert saved == {t: 6 * (2 if t[1] == "us-east-1" else 1) for t in TARGETS}


class PickySts:
    """moto lets any role be assumed; the real STS refuses a role that does not trust the hub."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def assume_role(self, **kwargs: Any) -> Any:
        if kwargs["RoleArn"].endswith("/missing"):
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not authorized"}}, "AssumeRole")
        return self.real.assume_role(**kwargs)


def test_a_target_whose_role_cannot_be_assumed_is_retried_and_the_others_still_run(world: FleetWorld) -> None:
    clusters = _fleet(world)
    broken = fleet_yaml().replace(
        "  - account: '333333333333'\n    region: eu-west-1\n",
        "  - account: '333333333333'\n    region: eu-west-1\n    role_arn: arn:aws:iam::333333333333:role/missing\n",
    )
    config_store.write_text(config_store.Location("dynamodb", TABLE), broken)
    runtime = world.runtime()
    real = runtime.client_for
    runtime.client_for = lambda service, region: (
        PickySts(real(service, region)) if service == "sts" else real(service, region)
    )

    orchestrator({}, None, runtime)
    records = drain(world.queue_url)
    answer = worker({"Records": records}, None, runtime)

    assert len(answer["batchItemFailures"]) == 1  # SQS retries it, then the DLQ alarm fires
    assert set(world.updates) == set(clusters) - {("333333333333", "eu-west-1", "train")}
    errors = [line for line in world.log_lines() if line.get("level") == "ERROR"]
    assert [(e["account"], e["region"]) for e in errors] == [("333333333333", "eu-west-1")]
    assert "cannot assume arn:aws:iam::333333333333:role/missing" in errors[0]["message"]
