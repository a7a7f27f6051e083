"""FSx for Lustre file systems a cluster uses, and what they cost per hour whatever the cluster does.

Three ways to find them, merged: ids named in the config, the ``fsx_dns_name`` in the legacy
provisioning_parameters.json beside the cluster's lifecycle scripts (the id is the DNS name's first
label), and the tag ``hyperpod-scheduler:cluster=<name>`` on the file system. Sizes, deployment
types and throughput come from ``fsx:DescribeFileSystems``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from hyperpod_scheduler.cost.prices import HOURS_PER_MONTH, PriceTable

CLUSTER_TAG = "hyperpod-scheduler:cluster"
PARAMS_FILE = "provisioning_parameters.json"
_FS_ID = re.compile(r"^fs-[0-9a-f]{8,17}$")


@dataclass(frozen=True)
class FileSystem:
    id: str
    storage_gib: int
    deployment_type: str | None  # None for a non-Lustre file system (not priced)
    throughput: int | None  # MB/s per TiB; None for scratch
    found_by: str = ""

    def hourly(self, prices: PriceTable) -> float | None:
        """USD per hour of provisioned storage, or None when the table has no price for it."""
        if self.deployment_type is None:
            return None
        price = prices.fsx(self.deployment_type, self.throughput)
        return None if price is None else self.storage_gib * price.usd / HOURS_PER_MONTH


def id_from_dns(dns_name: str) -> str | None:
    """``fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com`` -> ``fs-0123456789abcdef0``."""
    first = dns_name.strip().split(".", 1)[0].lower()
    return first if _FS_ID.match(first) else None


def source_uris(cluster: Mapping[str, Any]) -> list[str]:
    """Distinct lifecycle ``SourceS3Uri`` values of a DescribeCluster answer, in group order."""
    seen: list[str] = []
    for group in cluster.get("InstanceGroups") or []:
        uri = (group.get("LifeCycleConfig") or {}).get("SourceS3Uri")
        if uri and uri not in seen:
            seen.append(uri)
    return seen


def split_s3(uri: str, name: str) -> tuple[str, str]:
    """Bucket and key of ``name`` under the prefix ``uri`` (``s3://bucket/prefix/``)."""
    rest = uri.removeprefix("s3://")
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    return bucket, f"{prefix}/{name}" if prefix else name


def ids_from_params(s3: Any, uris: Iterable[str]) -> list[str]:
    """File system ids named by provisioning_parameters.json under each prefix; a missing file is no id."""
    ids: list[str] = []
    for uri in uris:
        bucket, key = split_s3(uri, PARAMS_FILE)
        try:
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NoSuchBucket"):
                continue
            raise
        try:
            doc = json.loads(body)
        except ValueError:
            continue  # a hand-written file we cannot read holds no id we could trust
        fs_id = id_from_dns(str(doc.get("fsx_dns_name", ""))) if isinstance(doc, dict) else None
        if fs_id and fs_id not in ids:
            ids.append(fs_id)
    return ids


def _parse(fs: Mapping[str, Any], found_by: str) -> FileSystem:
    lustre = fs.get("LustreConfiguration") or {}
    is_lustre = fs.get("FileSystemType") == "LUSTRE"
    return FileSystem(
        id=str(fs["FileSystemId"]),
        storage_gib=int(fs.get("StorageCapacity") or 0),
        deployment_type=str(lustre.get("DeploymentType") or "SCRATCH_1") if is_lustre else None,
        throughput=lustre.get("PerUnitStorageThroughput") if is_lustre else None,
        found_by=found_by,
    )


def _all(fsx: Any, ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    kwargs: dict[str, Any] = {"FileSystemIds": list(ids)} if ids else {}
    pages = fsx.get_paginator("describe_file_systems").paginate(**kwargs)
    return [fs for page in pages for fs in page.get("FileSystems", [])]


def discover(
    cluster_name: str,
    fsx: Any,
    *,
    configured: Sequence[str] = (),
    s3: Any = None,
    cluster: Mapping[str, Any] | None = None,
    by_tag: bool = True,
) -> list[FileSystem]:
    """Every FSx file system of ``cluster_name``, each once, with how it was found.

    ``cluster`` is its DescribeCluster answer (for the lifecycle prefixes); pass ``s3`` to read
    provisioning_parameters.json there. A configured or referenced id that no longer exists is skipped.
    """
    wanted: dict[str, str] = {fs_id: "config" for fs_id in configured}
    if s3 is not None and cluster is not None:
        for fs_id in ids_from_params(s3, source_uris(cluster)):
            wanted.setdefault(fs_id, PARAMS_FILE)
    found: dict[str, FileSystem] = {}
    for fs_id, how in wanted.items():
        try:
            described = _all(fsx, [fs_id])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "FileSystemNotFound":
                continue
            raise
        for fs in described:
            found[fs["FileSystemId"]] = _parse(fs, how)
    if by_tag:
        for fs in _all(fsx):
            tags = {t.get("Key"): t.get("Value") for t in fs.get("Tags") or []}
            if tags.get(CLUSTER_TAG) == cluster_name and fs["FileSystemId"] not in found:
                found[fs["FileSystemId"]] = _parse(fs, "tag")
    return list(found.values())
