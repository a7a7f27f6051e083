"""Queue markers on the state table (moto): conditional, token-bound, expiring."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from hyperpod_scheduler.deploy.markers import QUEUING_S, Markers
from hyperpod_scheduler.store.dynamodb import create_table
from tests.store.dynamodb_mock import REGION, mocked_aws

T = datetime(2026, 11, 30, 19, 0, tzinfo=UTC)


@pytest.fixture
def markers() -> Iterator[Markers]:
    with mocked_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        create_table(client, "t")
        yield Markers(client, "t")


def test_a_part_is_claimed_once_until_its_claim_lapses(markers: Markers) -> None:
    assert markers.claim("a/r/0of1", "one", T)
    assert not markers.claim("a/r/0of1", "two", T + timedelta(seconds=QUEUING_S - 1))
    # The orchestrator that claimed it died before sending: a later tick takes it over.
    assert markers.claim("a/r/0of1", "three", T + timedelta(seconds=QUEUING_S + 1))
    assert markers.claim("a/r/1of2", "four", T)  # another part is another marker


def test_only_the_claims_owner_moves_or_clears_it(markers: Markers) -> None:
    assert markers.claim("k", "mine", T)
    assert not markers.mark("k", "theirs", "running", T + timedelta(hours=1))
    assert markers.mark("k", "mine", "queued", T + timedelta(hours=1))
    assert not markers.claim("k", "other", T + timedelta(minutes=30))  # queued: held for the hour
    assert not markers.release("k", "theirs")
    assert markers.release("k", "mine")
    assert markers.claim("k", "next", T)  # released: the next tick may queue it at once
    assert not markers.release("gone", "mine")


def test_held_reads_many_markers_in_batches(markers: Markers) -> None:
    keys = [f"a/r/{i}of250" for i in range(250)]
    for k in keys[::3]:
        assert markers.claim(k, "t", T)
    assert markers.claim("lapsed", "t", T - timedelta(hours=1))
    held = markers.held([*keys, "lapsed", keys[0]], T)  # a key asked twice is asked once
    assert set(held) == set(keys[::3])
