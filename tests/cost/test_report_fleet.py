"""FSx discovery for a fleet (issue 30): one shared refresh, the clusters described a bounded number at a
time, the same answer and the same notes as one after another, and a cached answer that says its age."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperpod_scheduler.app import report as reports
from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.cluster.storage import storage_members
from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.cost import fsx
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.conftest import START

NAMES = [f"fleet-{i:02d}" for i in range(12)]
KEYS = [f"123456789012/us-east-1/{n}" for n in [*NAMES, "gone-cluster"]]  # one SageMaker does not know


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with running_emulator(virtual_start=START, seed=7, in_process=True) as e:
        assert e.storage is not None
        client = AwsClients(e.endpoint).client("sagemaker", None, "us-east-1")
        for name in NAMES:
            client.create_cluster(**slurm_request(name, {"gpu": ("ml.g5.xlarge", 1)}))
        for i, name in enumerate(NAMES[:5]):
            e.storage.fsx.add(
                file_system_id=f"fs-0a1b2c3d4e5f607{i:02d}",
                storage_capacity=1200 * (i + 1),
                deployment_type="PERSISTENT_2",
                throughput=250,
                tags={"hyperpod-scheduler:cluster": name},
            )
        yield e


class Counting:
    """The real SageMaker client, each DescribeCluster 20 ms slower (AWS's latency) and counted."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.lock = threading.Lock()
        self.in_flight = self.most = self.calls = 0

    def describe_cluster(self, **kw: Any) -> Any:
        with self.lock:
            self.calls += 1
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        try:
            time.sleep(0.02)
            return self.real.describe_cluster(**kw)
        finally:
            with self.lock:
                self.in_flight -= 1


def _finder(emu: Emulator, concurrency: int, **kw: Any) -> tuple[reports.FileSystemFinder, Counting]:
    aws = AwsClients(emu.endpoint)
    counting = Counting(aws.client("sagemaker", None, "us-east-1"))
    finder = reports.FileSystemFinder(Config(), lambda region, profile: counting, aws, concurrency=concurrency, **kw)
    return finder, counting


def test_a_fleet_is_described_a_bounded_number_at_a_time_with_the_serial_answer(emu: Emulator) -> None:
    serial, one_by_one = _finder(emu, 1)
    serial_notes: list[str] = []
    expected = serial(KEYS, serial_notes)
    fleet, counted = _finder(emu, 4)
    notes: list[str] = []
    found = fleet(KEYS, notes)
    assert found == expected and notes == serial_notes  # same file systems, same notes in the keys' order
    assert {k.rsplit("/", 1)[-1] for k, v in found.items() if v} == set(NAMES[:5])
    assert [n for n in notes if "gone-cluster" in n] == [
        "gone-cluster: no DescribeCluster answer (ResourceNotFound); FSx found by config and tag only"
    ]
    assert one_by_one.most == 1 and 1 < counted.most <= 4  # at once, and never more than asked for
    assert counted.calls == one_by_one.calls == len(KEYS)  # each cluster described once per refresh


def test_a_cached_refresh_says_how_old_it_is_and_is_found_again_when_stale(emu: Emulator) -> None:
    now = [1000.0]
    finder, counted = _finder(emu, 4, cache_s=300.0, clock=lambda: now[0])
    first: list[str] = []
    found = finder(KEYS, first)
    now[0] += 90
    again: list[str] = []
    assert finder(KEYS, again) == found and counted.calls == len(KEYS)  # no AWS call for the cached answer
    assert again[: len(first)] == first
    assert again[len(first) :] == [
        "FSx file systems as found 90 s ago (found again every 5 min): one added or removed since then is not shown yet"
    ]
    now[0] += 211
    later: list[str] = []
    finder(KEYS, later)
    assert counted.calls == 2 * len(KEYS) and later == first


def test_a_refresh_kept_on_disk_serves_the_next_report_for_the_same_clusters_settings_and_endpoint(
    emu: Emulator, tmp_path: Path
) -> None:
    """`report --fsx-max-age`: the next process reuses the refresh (saying how old it is) only for the same
    keys and identity and only while young enough; a damaged file is found again, never an error."""
    wall = [5000.0]
    path = tmp_path / "cache" / "fsx-discovery.json"

    def finder(identity: str = "same") -> tuple[reports.FileSystemFinder, Counting]:
        saved = reports.SavedRefresh(path, identity, wall=lambda: wall[0])
        return _finder(emu, 4, cache_s=300.0, saved=saved)

    first, counted = finder()
    notes: list[str] = []
    found = first(KEYS, notes)
    assert counted.calls == len(KEYS) and oct(path.stat().st_mode & 0o777) == "0o600"
    wall[0] += 120
    again, recounted = finder()
    later: list[str] = []
    assert again(KEYS, later) == found and recounted.calls == 0  # a new process: no AWS call
    assert later == [*notes, later[-1]] and later[-1].startswith("FSx file systems as found 2 min ago")
    for other, keys in ((finder("another endpoint")[0], KEYS), (finder()[0], KEYS[:-1])):
        assert "as found" not in " ".join(_notes(other, keys))  # another identity or other clusters: found now
    wall[0] += 300
    assert "as found" not in " ".join(_notes(finder()[0], KEYS))  # too old
    path.write_text('{"identity": "same", "keys": [], "at": "x"', encoding="utf-8")
    assert "as found" not in " ".join(_notes(finder()[0], KEYS))  # damaged: found again, and kept anew
    assert json.loads(path.read_text(encoding="utf-8"))["keys"] == KEYS


def _notes(finder: reports.FileSystemFinder, keys: list[str]) -> list[str]:
    notes: list[str] = []
    finder(keys, notes)
    return notes


@pytest.mark.parametrize(
    ("variable", "first", "second"),
    [
        ("AWS_PROFILE", "staging", "prod"),  # another account's clusters of the same names
        ("AWS_DEFAULT_REGION", "us-east-1", "eu-west-1"),  # a key without a region is found there
        ("AWS_CONFIG_FILE", "/tmp/a/config", "/tmp/b/config"),  # a profile's own endpoint_url or role
    ],
)
def test_a_kept_refresh_is_not_served_to_another_profile_region_or_aws_config(
    monkeypatch: pytest.MonkeyPatch, variable: str, first: str, second: str
) -> None:
    """`report --fsx-max-age` run again with AWS_PROFILE=prod after AWS_PROFILE=staging talks to another
    account: the refresh the first kept must not answer for the second (found now instead)."""
    from types import SimpleNamespace
    from typing import cast

    from hyperpod_scheduler.cli import report as cli_report
    from hyperpod_scheduler.cli.context import Context

    ctx = cast(Context, SimpleNamespace(config=None))
    monkeypatch.setenv(variable, first)
    one = cli_report._identity(ctx, AwsClients())
    monkeypatch.setenv(variable, second)
    assert cli_report._identity(ctx, AwsClients()) != one


def test_a_kept_refresh_file_holds_no_access_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the identity depends on is kept as a digest: the cache file never repeats an access key id."""
    from types import SimpleNamespace
    from typing import cast

    from hyperpod_scheduler.cli import report as cli_report
    from hyperpod_scheduler.cli.context import Context

    ctx = cast(Context, SimpleNamespace(config=None))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE01")
    one = cli_report._identity(ctx, AwsClients())
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE02")
    two = cli_report._identity(ctx, AwsClients())
    assert one != two and "AKIA" not in one


def test_what_a_stop_keeps_of_the_answer_finds_the_same_fsx_as_the_whole_answer() -> None:
    # Mounts on a group, a lifecycle prefix, a restricted group's managed FSx: everything FSx discovery
    # reads, and what the engine keeps with a stop's sizes (cluster.storage) must find the same.
    answer: dict[str, Any] = {
        "ClusterName": "c",
        "ClusterStatus": "InService",
        "InstanceGroups": [
            {
                "InstanceGroupName": "workers",
                "InstanceType": "ml.p5.48xlarge",
                "CurrentCount": 4,
                "LifeCycleConfig": {"SourceS3Uri": "s3://bucket/lifecycle/", "OnCreate": "on_create.sh"},
                "InstanceStorageConfigs": [
                    {"EbsVolumeConfig": {"VolumeSizeInGB": 500}},
                    {"FsxLustreConfig": {"DnsName": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"}},
                ],
            },
            {"InstanceGroupName": "controller", "InstanceType": "ml.m5.xlarge", "CurrentCount": 1},
        ],
        "RestrictedInstanceGroups": [
            {"InstanceGroupName": "r", "EnvironmentConfig": {"FSxLustreConfig": {"SizeInGiB": 1200}}}
        ],
        "RestrictedInstanceGroupsConfig": {
            "SharedEnvironmentConfig": {"CurrentFSxLustreConfig": {"SizeInGiB": 2400, "PerUnitStorageThroughput": 250}}
        },
    }
    kept = storage_members(answer)
    assert fsx.ids_from_storage_configs(kept) == fsx.ids_from_storage_configs(answer) == ["fs-0123456789abcdef0"]
    assert fsx.source_uris(kept) == fsx.source_uris(answer) == ["s3://bucket/lifecycle/"]
    assert fsx.managed_file_systems(kept) == fsx.managed_file_systems(answer) != []
    assert "controller" not in json.dumps(kept) and "InstanceType" not in json.dumps(kept)  # nothing else


def test_report_describes_no_cluster_whose_stop_the_engine_recorded(emu: Emulator) -> None:
    emu.advance(3600)  # every cluster in service: a stop is sent
    store = MemoryStore()
    client = AwsClients(emu.endpoint).client("sagemaker", None, "us-east-1")
    engine = Engine(store, lambda ref: client, emu.clock.now)
    for name in NAMES[:6]:
        assert engine.act(ref_for(name, "us-east-1"), "stop", transition_id=f"t-{name}").kind == "sent"
    keys = sorted(store.list_keys())
    assert len(keys) == 6
    describing, described = _finder(emu, 4)
    expected = describing(keys, [])
    assert described.calls == 6
    reading, none = _finder(emu, 4, described=reports.seen_by_stops(store))
    notes: list[str] = []
    assert reading(keys, notes) == expected  # the tagged file systems of the first five, as before
    assert none.calls == 0
    assert "FSx mounts of 6 cluster(s) as the scheduler's own last look at them recorded them" in " ".join(notes)
