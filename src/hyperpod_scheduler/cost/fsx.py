"""The FSx file systems a cluster uses, and what they cost per hour whatever the cluster does.

Where a cluster names its file systems, each way found separately and merged by file system id (the
report shows every way that found each one, ``found_by``):

- ``config``: ids listed under ``cost.fsx.file_systems`` for the cluster.
- ``InstanceStorageConfigs``: FSx for Lustre and OpenZFS mounts (``FsxLustreConfig`` /
  ``FsxOpenZfsConfig``, by ``DnsName``) on the cluster's instance groups and restricted instance groups,
  as DescribeCluster reports them; the id is the DNS name's first label.
- ``provisioning_parameters.json``: ``fsx_dns_name`` in the legacy file beside the lifecycle scripts.
- ``tag``: file systems tagged ``hyperpod-scheduler:cluster=<name>``.
- ``RestrictedInstanceGroupsConfig``: the FSx for Lustre that HyperPod manages for restricted instance
  groups is described only by size and throughput (no id, so nothing else can name it to merge with).

Sizes, deployment types and throughput of the named ones come from ``fsx:DescribeFileSystems``, read
once per region and shared by every cluster there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.aws.pages import Pages
from hyperpod_scheduler.cost.prices import HOURS_PER_MONTH, Price, PriceTable
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import bounded

CLUSTER_TAG = "hyperpod-scheduler:cluster"
PARAMS_FILE = "provisioning_parameters.json"
STORAGE_CONFIGS = "InstanceStorageConfigs"
RESTRICTED = "RestrictedInstanceGroupsConfig"
MANAGED_ID = "managed-by-hyperpod"
_FS_ID = re.compile(r"^fs-[0-9a-f]{8,17}$")
# PerUnitStorageThroughput values the restricted groups' managed FSx reports; they are PERSISTENT_2's
# tiers (PERSISTENT_1 has 50/100/200), which is the deployment type assumed for it (not confirmed).
_PERSISTENT_2_TIERS = (125, 250, 500, 1000)


@dataclass(frozen=True)
class FileSystem:
    id: str
    storage_gib: int
    deployment_type: str | None  # Lustre: SCRATCH_1 .. PERSISTENT_2; OpenZFS: SINGLE_AZ_1 ..; None: unknown
    throughput: int | None  # Lustre: MB/s per TiB (None for scratch); OpenZFS: MB/s provisioned
    found_by: tuple[str, ...] = ()
    file_system_type: str = "LUSTRE"  # LUSTRE and OPENZFS are priced; WINDOWS and ONTAP are listed only

    @property
    def label(self) -> str:
        kind = {"LUSTRE": "FSx for Lustre", "OPENZFS": "FSx for OpenZFS"}.get(self.file_system_type, "FSx")
        tier = f"/{self.throughput}" if self.throughput and self.file_system_type == "LUSTRE" else ""
        return f"{kind} {self.deployment_type or self.file_system_type}{tier}"

    def priced(self, prices: PriceTable) -> tuple[float, tuple[tuple[str, Price], ...]] | None:
        """USD per hour of what is provisioned and the prices that made it; None when it cannot be priced."""
        if self.file_system_type == "LUSTRE" and self.deployment_type:
            entry = prices.fsx_entry(self.deployment_type, self.throughput)
            if entry is None:
                return None
            return self.storage_gib * entry[1].usd / HOURS_PER_MONTH, ((f"fsx_gb_month {entry[0]}", entry[1]),)
        if self.file_system_type == "OPENZFS":
            both = prices.openzfs(self.deployment_type)
            if both is None:
                return None
            (skey, storage), (tkey, throughput) = both
            monthly = self.storage_gib * storage.usd + (self.throughput or 0) * throughput.usd
            used = ((f"fsx_gb_month {skey}", storage), (f"fsx_mbps_month {tkey}", throughput))
            return monthly / HOURS_PER_MONTH, used
        return None

    def hourly(self, prices: PriceTable) -> float | None:
        found = self.priced(prices)
        return None if found is None else found[0]


@dataclass
class Found:
    """What discovery found for one cluster, and what it could not look up (one line each)."""

    file_systems: list[FileSystem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def id_from_dns(dns_name: str) -> str | None:
    """``fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com`` -> ``fs-0123456789abcdef0``."""
    first = dns_name.strip().split(".", 1)[0].lower()
    return first if _FS_ID.match(first) else None


def _groups(cluster: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for member in ("InstanceGroups", "RestrictedInstanceGroups"):
        groups = cluster.get(member)
        if isinstance(groups, list):
            out.extend(g for g in groups if isinstance(g, Mapping))
    return out


def source_uris(cluster: Mapping[str, Any]) -> list[str]:
    """Distinct lifecycle ``SourceS3Uri`` values of a DescribeCluster answer, in group order."""
    seen: list[str] = []
    for group in _groups(cluster):
        lifecycle = group.get("LifeCycleConfig")
        uri = lifecycle.get("SourceS3Uri") if isinstance(lifecycle, Mapping) else None
        if isinstance(uri, str) and uri and uri not in seen:
            seen.append(uri)
    return seen


def ids_from_storage_configs(cluster: Mapping[str, Any]) -> list[str]:
    """File system ids mounted through the groups' ``InstanceStorageConfigs`` (Lustre and OpenZFS)."""
    ids: list[str] = []
    for group in _groups(cluster):
        configs = group.get(STORAGE_CONFIGS)
        for config in configs if isinstance(configs, list) else []:
            if not isinstance(config, Mapping):
                continue
            for member in ("FsxLustreConfig", "FsxOpenZfsConfig"):
                mount = config.get(member)
                dns = mount.get("DnsName") if isinstance(mount, Mapping) else None
                fs_id = id_from_dns(dns) if isinstance(dns, str) else None
                if fs_id and fs_id not in ids:
                    ids.append(fs_id)
    return ids


def managed_file_systems(cluster: Mapping[str, Any]) -> list[FileSystem]:
    """The restricted instance groups' FSx for Lustre that HyperPod manages, as DescribeCluster sizes it.

    The shared environment's file system serves every restricted group; a group's own
    ``EnvironmentConfig`` file system is counted only when there is no shared one (taken to be the same)."""
    config = cluster.get(RESTRICTED)
    shared = config.get("SharedEnvironmentConfig") if isinstance(config, Mapping) else None
    current = shared.get("CurrentFSxLustreConfig") if isinstance(shared, Mapping) else None
    described: list[tuple[str, Any]] = [("shared", current)] if isinstance(current, Mapping) else []
    if not described:
        for group in cluster.get("RestrictedInstanceGroups") or []:
            env = group.get("EnvironmentConfig") if isinstance(group, Mapping) else None
            lustre = env.get("FSxLustreConfig") if isinstance(env, Mapping) else None
            if isinstance(lustre, Mapping):
                described.append((str(group.get("InstanceGroupName", "?")), lustre))
    out = []
    for owner, lustre in described:
        size, tier = lustre.get("SizeInGiB"), lustre.get("PerUnitStorageThroughput")
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            continue
        throughput = tier if isinstance(tier, int) and not isinstance(tier, bool) else None
        deployment = "PERSISTENT_2" if throughput in _PERSISTENT_2_TIERS else None
        out.append(FileSystem(f"{MANAGED_ID}:{owner}", size, deployment, throughput, (RESTRICTED,)))
    return out


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
        if not uri.startswith("s3://"):
            continue  # an https:// lifecycle source is not an S3 prefix we can read
        bucket, key = split_s3(uri, PARAMS_FILE)
        try:
            body = bounded.read_stream(s3.get_object(Bucket=bucket, Key=key)["Body"], f"s3://{bucket}/{key}")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NoSuchBucket"):
                continue
            raise
        try:
            doc = bounded.load_json(body, f"s3://{bucket}/{key}")
        except UsageError:
            continue  # a hand-written file we cannot read holds no id we could trust
        fs_id = id_from_dns(str(doc.get("fsx_dns_name", ""))) if isinstance(doc, dict) else None
        if fs_id and fs_id not in ids:
            ids.append(fs_id)
    return ids


def parse_file_system(fs: Mapping[str, Any], found_by: tuple[str, ...]) -> FileSystem:
    kind = str(fs.get("FileSystemType") or "")
    deployment: Any = None
    throughput: Any = None
    if kind == "LUSTRE":
        lustre = fs.get("LustreConfiguration") or {}
        deployment = lustre.get("DeploymentType") or "SCRATCH_1"
        throughput = lustre.get("PerUnitStorageThroughput")
    elif kind == "OPENZFS":
        zfs = fs.get("OpenZFSConfiguration") or {}
        deployment, throughput = zfs.get("DeploymentType"), zfs.get("ThroughputCapacity")
    return FileSystem(
        id=str(fs["FileSystemId"]),
        storage_gib=int(fs.get("StorageCapacity") or 0),
        deployment_type=str(deployment) if deployment else None,
        throughput=throughput if isinstance(throughput, int) and not isinstance(throughput, bool) else None,
        found_by=found_by,
        file_system_type=kind or "unknown",
    )


def list_file_systems(
    fsx: Any, ids: Sequence[str] | None = None, notes: list[str] | None = None
) -> list[dict[str, Any]]:
    """DescribeFileSystems, every page (all of the region's, or just ``ids``) within its bounds; a read
    the bounds ended early adds its line to ``notes``."""
    kwargs: dict[str, Any] = {"FileSystemIds": list(ids)} if ids else {}
    listed = Pages(lambda **kw: fsx.describe_file_systems(**kw), "DescribeFileSystems", "FileSystems", **kwargs)
    found = [fs for fs in listed if isinstance(fs, dict)]
    if listed.cut and notes is not None:
        notes.append(f"FSx {listed.cut}: file systems beyond them not counted")
    return found


def discover(
    cluster_name: str,
    fsx: Any,
    *,
    configured: Sequence[str] = (),
    s3: Any = None,
    cluster: Mapping[str, Any] | None = None,
    by_tag: bool = True,
    listing: Sequence[Mapping[str, Any]] | None = None,
) -> Found:
    """Every file system of ``cluster_name``, each once, with every way that found it.

    ``cluster`` is its DescribeCluster answer (mounts, restricted groups, lifecycle prefixes); pass ``s3``
    to read provisioning_parameters.json there. ``listing`` is the region's DescribeFileSystems answer
    when the caller already has it (with ``by_tag`` it is read once here otherwise). A named id that
    DescribeFileSystems does not know is left out, with a note."""
    found = Found()
    wanted: dict[str, list[str]] = {}

    def want(fs_id: str, how: str) -> None:
        hows = wanted.setdefault(fs_id, [])
        if how not in hows:
            hows.append(how)

    for fs_id in configured:
        want(fs_id, "config")
    if cluster is not None:
        for fs_id in ids_from_storage_configs(cluster):
            want(fs_id, STORAGE_CONFIGS)
        if s3 is not None:
            try:
                for fs_id in ids_from_params(s3, source_uris(cluster)):
                    want(fs_id, PARAMS_FILE)
            except (ClientError, BotoCoreError) as exc:
                why = _why(exc)
                found.notes.append(f"{cluster_name}: {PARAMS_FILE} not read ({why}); FSx found the other ways only")
    if listing is None and by_tag:
        listing = list_file_systems(fsx, notes=found.notes)
    described = {str(fs.get("FileSystemId")): fs for fs in listing or ()}
    for listed in described.values():
        tags = {t.get("Key"): t.get("Value") for t in listed.get("Tags") or [] if isinstance(t, Mapping)}
        if by_tag and tags.get(CLUSTER_TAG) == cluster_name:
            want(str(listed["FileSystemId"]), "tag")
    for fs_id, hows in wanted.items():
        fs = described.get(fs_id) if listing is not None else _describe_one(fsx, fs_id)
        if fs is None:
            found.notes.append(
                f"{cluster_name}: {fs_id} (named by {', '.join(hows)}) is not known to DescribeFileSystems "
                "in this account and region: not counted"
            )
            continue
        found.file_systems.append(parse_file_system(fs, tuple(hows)))
    if cluster is not None:
        found.file_systems.extend(managed_file_systems(cluster))
    return found


def _why(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or exc)
    return str(exc)


def _describe_one(fsx: Any, fs_id: str) -> Mapping[str, Any] | None:
    try:
        answer = list_file_systems(fsx, [fs_id])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "FileSystemNotFound":
            return None
        raise
    return answer[0] if answer else None
