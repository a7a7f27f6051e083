"""The emulator's S3 and FSx beside HyperPod: what the cost report and lifecycle uploads read, through boto3."""

from __future__ import annotations

import ast
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.engine.conftest import START
from tests.sessions import shared_session

BUCKET = "sagemaker-lifecycle-demo"


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with running_emulator(virtual_start=START, seed=5, in_process=True) as e:
        yield e


def _client(emu: Emulator, service: str) -> Any:
    session = shared_session()
    return session.client(service, endpoint_url=emu.endpoint)  # type: ignore[call-overload]


def test_objects_round_trip_and_missing_ones_answer_as_s3_does(emu: Emulator) -> None:
    s3 = _client(emu, "s3")
    s3.create_bucket(Bucket=BUCKET)
    body = json.dumps({"version": "1.0.0", "fsx_dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"})
    s3.put_object(Bucket=BUCKET, Key="scripts/provisioning_parameters.json", Body=body.encode())
    got = s3.get_object(Bucket=BUCKET, Key="scripts/provisioning_parameters.json")
    assert got["Body"].read().decode() == body and got["ETag"].startswith('"')
    assert s3.head_object(Bucket=BUCKET, Key="scripts/provisioning_parameters.json")["ContentLength"] == len(body)
    with pytest.raises(ClientError) as missing:
        s3.get_object(Bucket=BUCKET, Key="scripts/nope.json")
    assert missing.value.response["Error"]["Code"] == "NoSuchKey"
    with pytest.raises(ClientError) as no_bucket:
        s3.put_object(Bucket="sagemaker-never-made", Key="a", Body=b"x")
    assert no_bucket.value.response["Error"]["Code"] == "NoSuchBucket"
    with pytest.raises(ClientError) as head:
        s3.head_object(Bucket=BUCKET, Key="nope")
    assert head.value.response["Error"]["Code"] == "404"
    with pytest.raises(ClientError) as again:
        s3.create_bucket(Bucket=BUCKET)
    assert again.value.response["Error"]["Code"] == "BucketAlreadyOwnedByYou"


def test_listing_pages_through_a_prefix(emu: Emulator) -> None:
    s3 = _client(emu, "s3")
    s3.create_bucket(Bucket="sagemaker-listing")
    for i in range(5):
        s3.put_object(Bucket="sagemaker-listing", Key=f"lc/{i}.sh", Body=b"#!/bin/sh\n")
    s3.put_object(Bucket="sagemaker-listing", Key="other/x", Body=b"")
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket="sagemaker-listing", Prefix="lc/", PaginationConfig={"PageSize": 2}
    )
    keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
    assert keys == [f"lc/{i}.sh" for i in range(5)]


def test_file_systems_are_described_paged_and_by_id(emu: Emulator) -> None:
    assert emu.storage is not None
    lustre = emu.storage.fsx.add(
        file_system_id="fs-0a1b2c3d4e5f60718",
        storage_capacity=12000,
        deployment_type="PERSISTENT_2",
        throughput=250,
        tags={"hyperpod-scheduler:cluster": "p5-training"},
    )
    assert lustre["DNSName"] == "fs-0a1b2c3d4e5f60718.fsx.us-east-1.amazonaws.com"
    for _ in range(3):
        emu.storage.fsx.add(
            file_system_type="OPENZFS", storage_capacity=64, deployment_type="SINGLE_AZ_2", throughput=160
        )
    fsx = _client(emu, "fsx")
    pages = list(fsx.get_paginator("describe_file_systems").paginate(PaginationConfig={"PageSize": 3}))
    listed = [f for page in pages for f in page["FileSystems"]]
    assert len(pages) == 2 and len(listed) == 4 and len({f["FileSystemId"] for f in listed}) == 4
    (one,) = fsx.describe_file_systems(FileSystemIds=["fs-0a1b2c3d4e5f60718"])["FileSystems"]
    assert one["LustreConfiguration"] == {
        "DeploymentType": "PERSISTENT_2",
        "MountName": "fsx",
        "PerUnitStorageThroughput": 250,
    }
    assert one["Tags"] == [{"Key": "hyperpod-scheduler:cluster", "Value": "p5-training"}]
    with pytest.raises(ClientError) as missing:
        fsx.describe_file_systems(FileSystemIds=["fs-0000000000000dead"])
    assert missing.value.response["Error"]["Code"] == "FileSystemNotFound"
    # Another region's account holds none of them.
    west = shared_session("us-west-2")
    assert west.client("fsx", endpoint_url=emu.endpoint).describe_file_systems()["FileSystems"] == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"file_system_type": "LUSTRE", "deployment_type": "PERSISTENT_2", "throughput": 300},
            "PerUnitStorageThroughput 300",
        ),
        ({"file_system_type": "OPENZFS", "throughput": 0}, "ThroughputCapacity 0"),
        ({"file_system_type": "EFS"}, "FileSystemType 'EFS'"),
        ({"storage_capacity": -1}, "StorageCapacity -1"),
        ({"file_system_id": "fs-xyz"}, "'fs-xyz' is not fs- followed by"),
        ({"size": 3}, "unknown field 'size'"),
    ],
)
def test_the_admin_endpoint_adds_file_systems_and_refuses_bad_ones_in_one_line(
    emu: Emulator, fields: dict[str, Any], message: str
) -> None:
    request = urllib.request.Request(f"{emu.endpoint}/_emulator/fsx", data=json.dumps(fields).encode(), method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    answer = json.loads(refused.value.read())
    assert refused.value.code == 400 and message in answer["message"] and "\n" not in answer["message"]


def test_the_admin_endpoints_add_a_bucket_and_a_file_system(emu: Emulator) -> None:
    def post(route: str, doc: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            f"{emu.endpoint}/_emulator/{route}", data=json.dumps(doc).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    added = post("fsx", {"file_system_id": "fs-00000000000000abc", "storage_capacity": 1200, "region": "eu-west-1"})
    assert added["FileSystem"]["LustreConfiguration"]["DeploymentType"] == "SCRATCH_2"
    post("s3/buckets", {"name": "sagemaker-from-admin"})
    _client(emu, "s3").put_object(Bucket="sagemaker-from-admin", Key="k", Body=b"v")
    with urllib.request.urlopen(f"{emu.endpoint}/_emulator/s3/buckets", timeout=10) as answer:
        assert "sagemaker-from-admin" in json.loads(answer.read())["Buckets"]


def test_the_storage_modules_import_nothing_of_the_product_but_errors() -> None:
    folder = Path(__file__).parents[2] / "src" / "hyperpod_scheduler" / "emulator"
    for name in ("storage.py", "storage_s3.py", "storage_fsx.py"):
        tree = ast.parse((folder / name).read_text())
        imported = [
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hyperpod_scheduler")
        ]
        assert all(m == "hyperpod_scheduler.errors" or m.startswith("hyperpod_scheduler.emulator") for m in imported), (
            name
        )
