"""The account's storage beside the HyperPod control plane: S3 buckets and FSx file systems.

Requests reach it through the same loopback endpoint as SageMaker (``AWS_ENDPOINT_URL`` covers every
service): FSx calls by their ``X-Amz-Target``, S3 calls by their SigV4 signing scope. Tests and the
demo add what an account would already hold through ``emu.storage`` or the admin endpoints
``POST /_emulator/fsx`` (one file system, the fields of ``FileSystems.add``) and
``POST /_emulator/s3/buckets`` (``{"name": BUCKET}``); ``GET`` on either lists what is there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperpod_scheduler.emulator.clock import Clock
from hyperpod_scheduler.emulator.errors import EmulatorError, validation
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT, Reply, json_reply, region_from_authorization
from hyperpod_scheduler.emulator.storage_fsx import FileSystems, FsxJsonApi
from hyperpod_scheduler.emulator.storage_s3 import Buckets, S3Error, S3RestApi

_ADD_FIELDS = (
    "region",
    "file_system_id",
    "file_system_type",
    "storage_capacity",
    "deployment_type",
    "throughput",
    "tags",
    "mount_name",
)


class Storage:
    def __init__(self, clock: Clock, account: str = DEFAULT_ACCOUNT, seed: int = 0) -> None:
        self.s3 = Buckets(clock)
        self.fsx = FileSystems(clock, account, seed)
        self._s3_api = S3RestApi(self.s3)
        self._fsx_api = FsxJsonApi(self.fsx)

    def handle(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Reply | None:
        """The answer to a storage request, or None when the request is not for S3 or FSx."""
        authorization = headers.get("Authorization")
        amz_target = headers.get("X-Amz-Target")
        if method == "POST" and FsxJsonApi.handles(amz_target):
            return self._fsx_api.handle(str(amz_target), body, region_from_authorization(authorization))
        if S3RestApi.handles(authorization):
            return self._s3_api.handle(method, headers.get("Host", ""), target, headers.get("Content-Type"), body)
        return None

    def admin(self, method: str, route: str, payload: Mapping[str, Any]) -> Reply | None:
        """``/_emulator/fsx`` and ``/_emulator/s3/buckets``; None for any other route."""
        if route == "fsx":
            if method == "GET":
                return json_reply(200, self.fsx.describe(str(payload.get("region", "us-east-1")), None, None, None))
            unknown = sorted(set(payload) - set(_ADD_FIELDS))
            if unknown:
                raise validation(f"fsx: unknown field {unknown[0]!r} (known: {', '.join(_ADD_FIELDS)})")
            try:
                return json_reply(200, {"FileSystem": self.fsx.add(**payload)})
            except TypeError as exc:  # a value of the wrong kind for a keyword
                raise validation(f"fsx: {exc}") from None
        if route == "s3/buckets":
            if method == "GET":
                return json_reply(200, {"Buckets": self.s3.names()})
            name = payload.get("name")
            if not isinstance(name, str):
                raise validation(f"s3/buckets: name must be a bucket name, got {name!r}")
            try:
                self.s3.create_bucket(name)
            except S3Error as exc:
                raise EmulatorError(exc.code, f"{exc.message}: {name}", exc.status) from None
            return json_reply(200, {"Bucket": name})
        return None

    def clear(self) -> None:
        self.s3.clear()
        self.fsx.clear()


__all__ = ["Storage"]
