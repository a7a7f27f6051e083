"""Amazon FSx as far as the demo and the quick tour read it: file systems an account already has, and
``DescribeFileSystems`` over them (AWS JSON 1.1, target prefix ``AWSSimbaAPIService_v20180301``).

File systems are added through the emulator's own interface (``emu.storage.fsx.add``, or
``POST /_emulator/fsx``), as if they had been created before the rehearsal: the emulator does not
model creating, resizing or deleting them. Shapes follow botocore's ``fsx`` service model; requests
are checked against it. Nothing here is persisted: file systems live as long as the emulator runs.
"""

from __future__ import annotations

import functools
import json
import random
import threading
from collections.abc import Mapping
from typing import Any, Final

import botocore.session
from botocore.model import ServiceModel
from botocore.validate import ParamValidator

from hyperpod_scheduler.emulator.clock import Clock
from hyperpod_scheduler.emulator.errors import EmulatorError
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT, Reply, decode_body, error_reply, json_reply

TARGET_PREFIX: Final = "AWSSimbaAPIService_v20180301."
TYPES: Final = ("LUSTRE", "OPENZFS", "WINDOWS", "ONTAP")
LUSTRE_DEPLOYMENTS: Final = ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
OPENZFS_DEPLOYMENTS: Final = ("SINGLE_AZ_1", "SINGLE_AZ_2", "SINGLE_AZ_HA_1", "SINGLE_AZ_HA_2", "MULTI_AZ_1")
# The documented per-TiB throughput tiers of persistent Lustre deployments.
LUSTRE_TIERS: Final = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}
_HEX: Final = frozenset("0123456789abcdef")


_model_lock = threading.Lock()


@functools.cache
def _fsx_model() -> ServiceModel:
    return botocore.session.get_session().get_service_model("fsx")


def fsx_model() -> ServiceModel:
    with _model_lock:  # one decode however many handler threads ask first
        return _fsx_model()


def _bad(message: str) -> EmulatorError:
    return EmulatorError("BadRequest", message, 400)


class FileSystems:
    """The account's FSx file systems by region; thread-safe."""

    def __init__(self, clock: Clock, account: str = DEFAULT_ACCOUNT, seed: int = 0) -> None:
        self._clock = clock
        self._account = account
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._by_region: dict[str, dict[str, dict[str, Any]]] = {}

    def add(
        self,
        *,
        region: str = "us-east-1",
        file_system_id: str | None = None,
        file_system_type: str = "LUSTRE",
        storage_capacity: int = 1200,
        deployment_type: str | None = None,
        throughput: int | None = None,
        tags: Mapping[str, str] | None = None,
        mount_name: str | None = None,
    ) -> dict[str, Any]:
        """A file system that exists from now on; returns its DescribeFileSystems entry.

        ``throughput`` is MB/s per TiB for persistent Lustre and MB/s for OpenZFS."""
        if file_system_type not in TYPES:
            raise _bad(f"FileSystemType {file_system_type!r} is not one of {', '.join(TYPES)}")
        if isinstance(storage_capacity, bool) or not isinstance(storage_capacity, int) or storage_capacity <= 0:
            raise _bad(f"StorageCapacity {storage_capacity!r} must be a positive number of GiB")
        with self._lock:
            fs_id = file_system_id or f"fs-{self._rng.getrandbits(68):017x}"
            if not (
                fs_id.startswith("fs-") and 11 <= len(fs_id) <= 21 and all(c in "0123456789abcdef" for c in fs_id[3:])
            ):
                raise _bad(f"FileSystemId {fs_id!r} is not fs- followed by 8 to 17 hex digits")
            regional = self._by_region.setdefault(region, {})
            if fs_id in regional:
                raise _bad(f"file system {fs_id} already exists in {region}")
            entry = self._entry(
                region, fs_id, file_system_type, storage_capacity, deployment_type, throughput, mount_name
            )
            entry["Tags"] = [{"Key": str(k), "Value": str(v)} for k, v in (tags or {}).items()]
            regional[fs_id] = entry
            copied: dict[str, Any] = json.loads(json.dumps(entry))
            return copied

    def _entry(
        self,
        region: str,
        fs_id: str,
        kind: str,
        gib: int,
        deployment: str | None,
        throughput: int | None,
        mount_name: str | None,
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "OwnerId": self._account,
            "CreationTime": self._clock.now().timestamp(),
            "FileSystemId": fs_id,
            "FileSystemType": kind,
            "Lifecycle": "AVAILABLE",
            "StorageCapacity": gib,
            "StorageType": "SSD",
            "DNSName": f"{fs_id}.fsx.{region}.amazonaws.com",
            "ResourceARN": f"arn:aws:fsx:{region}:{self._account}:file-system/{fs_id}",
        }
        if kind == "LUSTRE":
            deployment = deployment or "SCRATCH_2"
            if deployment not in LUSTRE_DEPLOYMENTS:
                raise _bad(f"Lustre DeploymentType {deployment!r} is not one of {', '.join(LUSTRE_DEPLOYMENTS)}")
            lustre: dict[str, Any] = {"DeploymentType": deployment, "MountName": mount_name or "fsx"}
            tiers = LUSTRE_TIERS.get(deployment)
            if tiers is not None:
                if throughput not in tiers:
                    raise _bad(f"PerUnitStorageThroughput {throughput!r} for {deployment} is not one of {tiers}")
                lustre["PerUnitStorageThroughput"] = throughput
            elif throughput is not None:
                raise _bad(f"PerUnitStorageThroughput is only for persistent deployments, not {deployment}")
            entry["LustreConfiguration"] = lustre
        elif kind == "OPENZFS":
            deployment = deployment or "SINGLE_AZ_1"
            if deployment not in OPENZFS_DEPLOYMENTS:
                raise _bad(f"OpenZFS DeploymentType {deployment!r} is not one of {', '.join(OPENZFS_DEPLOYMENTS)}")
            if isinstance(throughput, bool) or not isinstance(throughput, int) or throughput <= 0:
                raise _bad(f"OpenZFS ThroughputCapacity {throughput!r} must be a positive number of MB/s")
            entry["OpenZFSConfiguration"] = {"DeploymentType": deployment, "ThroughputCapacity": throughput}
        return entry

    def describe(
        self, region: str, ids: list[str] | None, max_results: int | None, token: str | None
    ) -> dict[str, Any]:
        with self._lock:
            regional = self._by_region.get(region, {})
            if ids:
                missing = [i for i in ids if i not in regional]
                if missing:
                    raise EmulatorError("FileSystemNotFound", f"File system '{missing[0]}' does not exist.", 400)
                chosen = [regional[i] for i in ids]
            else:
                chosen = [regional[k] for k in sorted(regional)]
            start = 0
            if token is not None:
                try:
                    start = int(token)
                except ValueError:
                    raise _bad(f"NextToken {token!r} is not one this service gave out") from None
                if not 0 <= start <= len(chosen):
                    raise _bad(f"NextToken {token!r} is not one this service gave out")
            end = len(chosen) if max_results is None else min(len(chosen), start + max_results)
            answer: dict[str, Any] = {"FileSystems": json.loads(json.dumps(chosen[start:end]))}
            if end < len(chosen):
                answer["NextToken"] = str(end)
            return answer

    def clear(self) -> None:
        with self._lock:
            self._by_region.clear()


class FsxJsonApi:
    """``X-Amz-Target: AWSSimbaAPIService_v20180301.<Operation>`` requests to ``FileSystems``."""

    def __init__(self, file_systems: FileSystems) -> None:
        self.file_systems = file_systems

    @staticmethod
    def handles(target: str | None) -> bool:
        return bool(target) and str(target).startswith(TARGET_PREFIX)

    def handle(self, target: str, body: bytes, region: str) -> Reply:
        try:
            operation = target[len(TARGET_PREFIX) :]
            if operation not in fsx_model().operation_names:
                raise EmulatorError("UnknownOperationException", f"Unknown operation {operation!r}", 400)
            params = decode_body(body)
            shape = fsx_model().operation_model(operation).input_shape
            report = ParamValidator().validate(params, shape) if shape is not None else None
            if report is not None and report.has_errors():
                raise _bad(report.generate_report().replace("\n", " "))
            if operation != "DescribeFileSystems":
                raise _bad(f"{operation} is not modelled by the emulator (it serves DescribeFileSystems)")
            answer = self.file_systems.describe(
                region, params.get("FileSystemIds"), params.get("MaxResults"), params.get("NextToken")
            )
            return json_reply(200, answer)
        except EmulatorError as exc:
            return error_reply(exc)


__all__ = ["TARGET_PREFIX", "FileSystems", "FsxJsonApi"]
