"""FSx discovery against moto: by provisioning_parameters.json, by config, by tag; and its hourly cost."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_scheduler.cost.fsx import FileSystem, discover, id_from_dns, split_s3
from hyperpod_scheduler.cost.prices import bundled

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
    lustre: dict[str, Any] = {"DeploymentType": deployment}
    if throughput:
        lustre["PerUnitStorageThroughput"] = throughput
    extra: dict[str, Any] = {"Tags": [{"Key": k, "Value": v} for k, v in tags.items()]} if tags else {}
    answer = fsx.create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=capacity,
        SubnetIds=["subnet-0123456789"],
        LustreConfiguration=lustre,
        **extra,
    )
    fs_id: str = answer["FileSystem"]["FileSystemId"]
    return fs_id


def _cluster(uri: str) -> dict[str, Any]:
    return {
        "ClusterName": "train",
        "InstanceGroups": [
            {"InstanceGroupName": "controller", "LifeCycleConfig": {"SourceS3Uri": uri, "OnCreate": "on_create.sh"}},
            {"InstanceGroupName": "gpu", "LifeCycleConfig": {"SourceS3Uri": uri, "OnCreate": "on_create.sh"}},
        ],
    }


def test_file_system_named_in_provisioning_parameters_is_found(aws: tuple[Any, Any]) -> None:
    fsx, s3 = aws
    fs_id = _fs(fsx, 4800, "PERSISTENT_2", 250)
    _fs(fsx, 1200, "SCRATCH_2", None)  # someone else's: must not be picked up
    params = {"version": "1.0.0", "workload_manager": "slurm", "fsx_dns_name": f"{fs_id}.fsx.{REGION}.amazonaws.com"}
    s3.put_object(Bucket=BUCKET, Key="lifecycle/provisioning_parameters.json", Body=json.dumps(params))
    found = discover("train", fsx, s3=s3, cluster=_cluster(f"s3://{BUCKET}/lifecycle/"))
    assert found == [FileSystem(fs_id, 4800, "PERSISTENT_2", 250, "provisioning_parameters.json")]


def test_tagged_and_configured_file_systems_are_found_once_each(aws: tuple[Any, Any]) -> None:
    fsx, _ = aws
    tagged = _fs(fsx, 2400, "PERSISTENT_1", 200, {"hyperpod-scheduler:cluster": "train"})
    _fs(fsx, 2400, "PERSISTENT_1", 200, {"hyperpod-scheduler:cluster": "other"})
    configured = _fs(fsx, 1200, "SCRATCH_2", None, {"hyperpod-scheduler:cluster": "train"})
    found = {fs.id: fs.found_by for fs in discover("train", fsx, configured=[configured])}
    assert found == {configured: "config", tagged: "tag"}


def test_missing_parameters_file_and_vanished_ids_find_nothing(aws: tuple[Any, Any]) -> None:
    fsx, s3 = aws
    found = discover("train", fsx, configured=["fs-0123456789abcdef0"], s3=s3, cluster=_cluster(f"s3://{BUCKET}/lc"))
    assert found == []


def test_parameters_without_fsx_find_nothing(aws: tuple[Any, Any]) -> None:
    fsx, s3 = aws
    s3.put_object(Bucket=BUCKET, Key="provisioning_parameters.json", Body=b'{"version": "1.0.0"}')
    assert discover("train", fsx, s3=s3, cluster=_cluster(f"s3://{BUCKET}"), by_tag=False) == []


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
    assert FileSystem("fs-01234567", 1200, None, None).hourly(bundled()) is None  # not Lustre: not priced
