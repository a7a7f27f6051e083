"""FSx discovery against moto: by InstanceStorageConfigs, provisioning_parameters.json, config, tag and the
restricted groups' managed file system; merged by id with every source shown; and the hourly cost."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_scheduler.cost.fsx import FileSystem, discover, id_from_dns, managed_file_systems, split_s3
from hyperpod_scheduler.cost.prices import bundled, layer, parse_table

REGION = "us-east-1"
BUCKET = "sagemaker-lifecycle-demo"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    for var, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(var, value)
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        yield boto3.client("fsx", region_name=REGION), s3


def _fs(fsx: Any, capacity: int, deployment: str, throughput: int | None, tags: dict[str, str] | None = None) -> str:
    extra: dict[str, Any] = {"Tags": [{"Key": k, "Value": v} for k, v in tags.items()]} if tags else {}
    if deployment.startswith(("SINGLE_AZ", "MULTI_AZ")):
        extra["OpenZFSConfiguration"] = {"DeploymentType": deployment, "ThroughputCapacity": throughput}
        kind = "OPENZFS"
    else:
        lustre: dict[str, Any] = {"DeploymentType": deployment}
        if throughput:
            lustre["PerUnitStorageThroughput"] = throughput
        extra["LustreConfiguration"] = lustre
        kind = "LUSTRE"
    answer = fsx.create_file_system(
        FileSystemType=kind, StorageCapacity=capacity, SubnetIds=["subnet-0123456789"], **extra
    )
    fs_id: str = answer["FileSystem"]["FileSystemId"]
    return fs_id


def _dns(fs_id: str) -> str:
    return f"{fs_id}.fsx.{REGION}.amazonaws.com"


def _cluster(uri: str | None = None, storage: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    lifecycle = {"LifeCycleConfig": {"SourceS3Uri": uri, "OnCreate": "on_create.sh"}} if uri else {}
    mounts = {"InstanceStorageConfigs": storage} if storage else {}
    return {
        "ClusterName": "train",
        "InstanceGroups": [
            {"InstanceGroupName": "controller", **lifecycle, **mounts},
            {"InstanceGroupName": "gpu", **lifecycle, **mounts},
        ],
        **extra,
    }


def test_file_system_named_in_provisioning_parameters_is_found(aws: tuple[Any, Any]) -> None:
    fsx, s3 = aws
    fs_id = _fs(fsx, 4800, "PERSISTENT_2", 250)
    _fs(fsx, 1200, "SCRATCH_2", None)  # someone else's: must not be picked up
    params = {"version": "1.0.0", "workload_manager": "slurm", "fsx_dns_name": _dns(fs_id)}
    s3.put_object(Bucket=BUCKET, Key="lifecycle/provisioning_parameters.json", Body=json.dumps(params))
    found = discover("train", fsx, s3=s3, cluster=_cluster(f"s3://{BUCKET}/lifecycle/"))
    assert found.file_systems == [FileSystem(fs_id, 4800, "PERSISTENT_2", 250, ("provisioning_parameters.json",))]
    assert found.notes == []


def test_lustre_and_openzfs_mounts_in_instance_storage_configs_are_found_once(aws: tuple[Any, Any]) -> None:
    fsx, _ = aws
    lustre = _fs(fsx, 12000, "PERSISTENT_2", 250)
    zfs = _fs(fsx, 2048, "SINGLE_AZ_2", 640)
    storage = [
        {"EbsVolumeConfig": {"VolumeSizeInGB": 500}},
        {"FsxLustreConfig": {"DnsName": _dns(lustre), "MountName": "abcdefgh", "MountPath": "/fsx"}},
        {"FsxOpenZfsConfig": {"DnsName": _dns(zfs), "MountPath": "/home"}},
    ]
    found = discover("train", fsx, cluster=_cluster(storage=storage), by_tag=False)
    # Both groups mount both: each file system once.
    assert [(f.id, f.file_system_type, f.deployment_type, f.throughput) for f in found.file_systems] == [
        (lustre, "LUSTRE", "PERSISTENT_2", 250),
        (zfs, "OPENZFS", "SINGLE_AZ_2", 640),
    ]
    assert all(f.found_by == ("InstanceStorageConfigs",) for f in found.file_systems)


def test_one_file_system_named_four_ways_is_counted_once_with_every_source(aws: tuple[Any, Any]) -> None:
    fsx, s3 = aws
    fs_id = _fs(fsx, 4800, "PERSISTENT_2", 125, {"hyperpod-scheduler:cluster": "train"})
    s3.put_object(Bucket=BUCKET, Key="lc/provisioning_parameters.json", Body=json.dumps({"fsx_dns_name": _dns(fs_id)}))
    storage = [{"FsxLustreConfig": {"DnsName": _dns(fs_id).upper(), "MountName": "m", "MountPath": "/fsx"}}]
    cluster = _cluster(f"s3://{BUCKET}/lc/", storage)
    found = discover("train", fsx, configured=[fs_id], s3=s3, cluster=cluster)
    (fs,) = found.file_systems
    assert fs.found_by == ("config", "InstanceStorageConfigs", "provisioning_parameters.json", "tag")


def test_tagged_and_configured_file_systems_are_found_once_each(aws: tuple[Any, Any]) -> None:
    fsx, _ = aws
    tagged = _fs(fsx, 2400, "PERSISTENT_1", 200, {"hyperpod-scheduler:cluster": "train"})
    _fs(fsx, 2400, "PERSISTENT_1", 200, {"hyperpod-scheduler:cluster": "other"})
    configured = _fs(fsx, 1200, "SCRATCH_2", None, {"hyperpod-scheduler:cluster": "train"})
    found = {fs.id: fs.found_by for fs in discover("train", fsx, configured=[configured]).file_systems}
    assert found == {configured: ("config", "tag"), tagged: ("tag",)}


def test_a_named_file_system_that_does_not_exist_is_a_note_not_a_figure(aws: tuple[Any, Any]) -> None:
    fsx, s3 = aws
    storage = [{"FsxLustreConfig": {"DnsName": _dns("fs-0000000000000dead"), "MountName": "m", "MountPath": "/f"}}]
    for by_tag in (True, False):  # from the region's listing, and one id at a time
        found = discover(
            "train",
            fsx,
            configured=["fs-0123456789abcdef0"],
            s3=s3,
            cluster=_cluster(f"s3://{BUCKET}/lc", storage),
            by_tag=by_tag,
        )
        assert found.file_systems == []
        assert len(found.notes) == 2 and "fs-0000000000000dead (named by InstanceStorageConfigs)" in found.notes[1]
        assert "not counted" in found.notes[0] and "\n" not in found.notes[0]


def test_parameters_without_fsx_find_nothing(aws: tuple[Any, Any]) -> None:
    fsx, s3 = aws
    s3.put_object(Bucket=BUCKET, Key="provisioning_parameters.json", Body=b'{"version": "1.0.0"}')
    assert discover("train", fsx, s3=s3, cluster=_cluster(f"s3://{BUCKET}"), by_tag=False).file_systems == []


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # The shared file system of the restricted groups' environment: once, whatever the groups say.
        (
            {
                "RestrictedInstanceGroupsConfig": {
                    "SharedEnvironmentConfig": {
                        "CurrentFSxLustreConfig": {"SizeInGiB": 4800, "PerUnitStorageThroughput": 250}
                    }
                },
                "RestrictedInstanceGroups": [
                    {
                        "InstanceGroupName": "rig",
                        "EnvironmentConfig": {"FSxLustreConfig": {"SizeInGiB": 4800, "PerUnitStorageThroughput": 250}},
                    }
                ],
            },
            [("managed-by-hyperpod:shared", 4800, "PERSISTENT_2", 250)],
        ),
        # Without a shared one, each restricted group's own.
        (
            {
                "RestrictedInstanceGroups": [
                    {
                        "InstanceGroupName": "a",
                        "EnvironmentConfig": {"FSxLustreConfig": {"SizeInGiB": 1200, "PerUnitStorageThroughput": 125}},
                    },
                    {
                        "InstanceGroupName": "b",
                        "EnvironmentConfig": {"FSxLustreConfig": {"SizeInGiB": 2400, "PerUnitStorageThroughput": 77}},
                    },
                ]
            },
            [("managed-by-hyperpod:a", 1200, "PERSISTENT_2", 125), ("managed-by-hyperpod:b", 2400, None, 77)],
        ),
        (
            {
                "RestrictedInstanceGroupsConfig": {
                    "SharedEnvironmentConfig": {"CurrentFSxLustreConfig": {"SizeInGiB": "big"}}
                }
            },
            [],
        ),
        ({}, []),
    ],
)
def test_restricted_groups_managed_fsx_is_priced_from_what_describe_cluster_says(
    config: dict[str, Any], expected: list[tuple[Any, ...]]
) -> None:
    found = managed_file_systems(config)
    assert [(f.id, f.storage_gib, f.deployment_type, f.throughput) for f in found] == expected
    assert all(f.found_by == ("RestrictedInstanceGroupsConfig",) for f in found)
    unknown_tier = [f for f in found if f.deployment_type is None]
    assert all(f.hourly(bundled()) is None for f in unknown_tier)  # an unknown tier is never guessed a price


@pytest.mark.parametrize(
    ("dns", "expected"),
    [
        ("fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com", "fs-0123456789abcdef0"),
        ("FS-0A1B2C3D.fsx.eu-west-1.amazonaws.com", "fs-0a1b2c3d"),
        ("myfs.example.com", None),
        ("", None),
    ],
)
def test_file_system_id_is_the_dns_names_first_label(dns: str, expected: str | None) -> None:
    assert id_from_dns(dns) == expected


def test_s3_prefix_split() -> None:
    assert split_s3("s3://b/a/b/", "p.json") == ("b", "a/b/p.json")
    assert split_s3("s3://b", "p.json") == ("b", "p.json")


def test_hourly_cost_is_capacity_times_gb_month_price_over_730_hours() -> None:
    fs = FileSystem("fs-0123456789abcdef0", 4800, "PERSISTENT_2", 250)
    assert fs.hourly(bundled()) == pytest.approx(4800 * 0.21 / 730)
    windows = FileSystem("fs-01234567", 1200, "SINGLE_AZ_2", 64, file_system_type="WINDOWS")
    assert windows.hourly(bundled()) is None  # listed, never priced


def test_openzfs_costs_storage_plus_throughput_when_a_price_file_has_both() -> None:
    zfs = FileSystem("fs-0123456789abcdef0", 2048, "SINGLE_AZ_2", 640, file_system_type="OPENZFS")
    assert zfs.hourly(bundled()) is None  # no bundled OpenZFS figure
    ours = parse_table({"fsx_gb_month": {"OPENZFS": 0.09}, "fsx_mbps_month": {"OPENZFS/SINGLE_AZ_2": 0.26}}, "t")
    priced = zfs.priced(layer(bundled(), ours))
    assert priced is not None
    assert priced[0] == pytest.approx((2048 * 0.09 + 640 * 0.26) / 730)
    assert [item for item, _ in priced[1]] == ["fsx_gb_month OPENZFS", "fsx_mbps_month OPENZFS/SINGLE_AZ_2"]
