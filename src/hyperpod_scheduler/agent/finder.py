"""Find the newest checkpoint under a location: an S3 prefix (ListObjectsV2) or a shared-storage path
(newest file mtime). The edge the pure audit is fed from."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hyperpod_scheduler.aws.pages import BOUNDS, Bounds, Pages
from hyperpod_scheduler.errors import HyperpodSchedulerError

# A checkpoint tree is a handful of directories; stop before a mistaken `/` walks a whole disk.
MAX_ENTRIES = 200_000

S3ClientFactory = Callable[[], Any]


class FinderError(HyperpodSchedulerError):
    """A checkpoint location could not be read (as opposed to: read, and empty)."""


class CheckpointFinder:
    """``newest(location)``: the newest checkpoint's time, or None when there is none."""

    def __init__(self, s3_client: S3ClientFactory | None = None, max_entries: int = MAX_ENTRIES) -> None:
        self._s3_factory = s3_client
        self._s3: Any = None
        self.max_entries = max_entries

    def newest(self, location: str) -> datetime | None:
        if location.startswith("s3://"):
            return self._newest_s3(location)
        return self._newest_path(location)

    def _client(self) -> Any:
        if self._s3 is None:
            if self._s3_factory is None:
                from hyperpod_scheduler.aws.clients import session  # bounded: deadlines and answer checks

                self._s3 = session().client("s3")
            else:
                self._s3 = self._s3_factory()
        return self._s3

    def _newest_s3(self, location: str) -> datetime | None:
        bucket, _, prefix = location[5:].partition("/")
        newest: datetime | None = None
        try:
            client = self._client()
            listed = Pages(
                lambda **kw: client.list_objects_v2(**kw),
                "ListObjectsV2",
                "Contents",
                bounds=Bounds(pages=BOUNDS["ListObjectsV2"].pages, items=self.max_entries),
                token="ContinuationToken",
                next_token="NextContinuationToken",
                Bucket=bucket,
                Prefix=prefix,
            )
            for obj in listed:
                if obj["Key"].endswith("/"):  # a console "folder" marker, not a checkpoint
                    continue
                stamp = obj["LastModified"]
                if newest is None or stamp > newest:
                    newest = stamp
        except Exception as exc:  # botocore's errors and a missing bucket alike: say which location
            raise FinderError(f"checkpoint location {location}: cannot list: {exc}") from None
        if listed.cut:  # the newest checkpoint may be among the objects not read: no answer, said
            raise FinderError(f"checkpoint location {location}: cannot list: {listed.cut}")
        return newest

    def _newest_path(self, location: str) -> datetime | None:
        if not os.path.exists(location):
            return None
        if os.path.isfile(location):
            return _mtime(os.stat(location).st_mtime)
        newest = 0.0
        seen = 0
        stack = [location]
        try:
            while stack:
                with os.scandir(stack.pop()) as entries:
                    for entry in entries:
                        seen += 1
                        if seen > self.max_entries:
                            raise FinderError(f"checkpoint location {location}: more than {self.max_entries} entries")
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=True):
                            newest = max(newest, entry.stat().st_mtime)
        except OSError as exc:
            raise FinderError(f"checkpoint location {location}: cannot read: {exc.strerror or exc}") from None
        return _mtime(newest) if newest else None


def _mtime(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
