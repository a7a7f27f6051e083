"""Clusters chosen by tag: the tag hyperpod-scheduler:schedule on a cluster picks a schedule by name."""

from __future__ import annotations

from hyperpod_scheduler.config.load import parse_config
from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.engine.fleet import Fleet
from tests.engine.conftest import CountingClient, three_tier_request


def test_tagged_clusters_are_governed_by_the_named_schedule(emu: Emulator, counting: CountingClient) -> None:
    client = counting.client
    for name, tag in (("tagged", "office"), ("explicit", "office"), ("untagged", None)):
        request = three_tier_request(name)
        if tag:
            request["Tags"] = [{"Key": "hyperpod-scheduler:schedule", "Value": tag}]
        client.create_cluster(**request)
    config = parse_config(
        {
            "schedules": {"office": "Mon-Fri 08:00-18:00 UTC", "nights": "Mon-Fri 20:00-23:00 UTC"},
            "targets": [
                {"region": "us-east-1", "tag_selector": True, "clusters": [{"name": "explicit", "schedule": "nights"}]}
            ],
        }
    )
    governed = {g.ref.name: g for g in Fleet(config, lambda ref: client).governed()}
    assert set(governed) == {"tagged", "explicit"}
    assert governed["tagged"].schedule_label == "office"
    assert governed["explicit"].schedule_label == "nights"  # an explicit entry wins over its tag


def test_a_tag_naming_an_unknown_schedule_skips_only_that_cluster(emu: Emulator, counting: CountingClient) -> None:
    for name, tag in (("bad", "no-such-schedule"), ("good", "office")):
        request = three_tier_request(name)
        request["Tags"] = [{"Key": "hyperpod-scheduler:schedule", "Value": tag}]
        counting.client.create_cluster(**request)
    config = parse_config(
        {"schedules": {"office": "Mon-Fri 08:00-18:00 UTC"}, "targets": [{"region": "us-east-1", "tag_selector": True}]}
    )
    fleet = Fleet(config, lambda ref: counting.client)
    assert [g.ref.name for g in fleet.governed()] == ["good"]
    assert (
        len(fleet.problems) == 1 and fleet.problems[0].cluster == "bad" and "no-such-schedule" in fleet.problems[0].why
    )
