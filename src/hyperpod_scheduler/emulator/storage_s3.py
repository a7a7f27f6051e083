"""Amazon S3 as far as lifecycle scripts need it: buckets and objects over the REST protocol.

Served: CreateBucket, HeadBucket, PutObject, GetObject, HeadObject, DeleteObject and ListObjectsV2,
path-style (``/bucket/key``, what botocore uses for an IP endpoint) or virtual-hosted on ``localhost``
(``bucket.localhost``). Errors are S3's XML shape (``NoSuchBucket``, ``NoSuchKey``, ...). Enough for
``cluster create --upload-scripts`` to write a lifecycle prefix and for the cost report to read its
``provisioning_parameters.json``; no versioning, ACLs, multipart uploads or checksums beyond the ETag.
Nothing is persisted: objects live as long as the emulator runs.
"""

from __future__ import annotations

import hashlib
import re
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime
from email.utils import format_datetime
from typing import Final
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

from hyperpod_scheduler.emulator.clock import Clock
from hyperpod_scheduler.emulator.protocol import Reply

_BUCKET: Final = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_XMLNS: Final = "http://s3.amazonaws.com/doc/2006-03-01/"
MAX_KEYS: Final = 1000


@dataclass(frozen=True)
class S3Object:
    body: bytes
    content_type: str
    last_modified: datetime

    @property
    def etag(self) -> str:
        return '"' + hashlib.md5(self.body, usedforsecurity=False).hexdigest() + '"'


class S3Error(Exception):
    def __init__(self, code: str, message: str, status: int, **extra: str) -> None:
        super().__init__(message)
        self.code, self.message, self.status, self.extra = code, message, status, extra


class Buckets:
    """Buckets and their objects; thread-safe. Bucket names are global, as in S3."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, dict[str, S3Object]] = {}

    def create_bucket(self, name: str) -> None:
        if not _BUCKET.match(name) or ".." in name:
            raise S3Error("InvalidBucketName", "The specified bucket is not valid.", 400, BucketName=name)
        with self._lock:
            if name in self._buckets:
                raise S3Error(
                    "BucketAlreadyOwnedByYou",
                    "Your previous request to create the named bucket succeeded and you already own it.",
                    409,
                    BucketName=name,
                )
            self._buckets[name] = {}

    def _bucket(self, name: str) -> dict[str, S3Object]:
        bucket = self._buckets.get(name)
        if bucket is None:
            raise S3Error("NoSuchBucket", "The specified bucket does not exist", 404, BucketName=name)
        return bucket

    def put(self, bucket: str, key: str, body: bytes, content_type: str = "binary/octet-stream") -> S3Object:
        if not key or len(key.encode("utf-8")) > 1024:
            raise (
                S3Error("KeyTooLongError", "Your key is too long", 400)
                if key
                else S3Error("InvalidRequest", "A key is required", 400)
            )
        with self._lock:
            obj = S3Object(bytes(body), content_type, self._clock.now())
            self._bucket(bucket)[key] = obj
            return obj

    def get(self, bucket: str, key: str) -> S3Object:
        with self._lock:
            obj = self._bucket(bucket).get(key)
        if obj is None:
            raise S3Error("NoSuchKey", "The specified key does not exist.", 404, Key=key)
        return obj

    def delete(self, bucket: str, key: str) -> None:
        with self._lock:
            self._bucket(bucket).pop(key, None)

    def exists(self, bucket: str) -> bool:
        with self._lock:
            return bucket in self._buckets

    def keys(self, bucket: str, prefix: str = "") -> list[tuple[str, S3Object]]:
        with self._lock:
            return sorted((k, o) for k, o in self._bucket(bucket).items() if k.startswith(prefix))

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._buckets)

    def clear(self) -> None:
        with self._lock:
            self._buckets.clear()


def _error(exc: S3Error, resource: str) -> Reply:
    rid = uuid.uuid4().hex[:16].upper()
    extra = "".join(f"<{k}>{escape(v)}</{k}>" for k, v in exc.extra.items())
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{exc.code}</Code><Message>{escape(exc.message)}</Message>{extra}"
        f"<Resource>{escape(resource)}</Resource><RequestId>{rid}</RequestId></Error>"
    ).encode()
    return Reply(exc.status, body, (("Content-Type", "application/xml"), ("x-amz-request-id", rid)))


def _ok(status: int = 200, body: bytes = b"", headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    rid = uuid.uuid4().hex[:16].upper()
    return Reply(status, body, (("x-amz-request-id", rid), *headers))


def _object_headers(obj: S3Object) -> tuple[tuple[str, str], ...]:
    return (
        ("Content-Type", obj.content_type),
        ("ETag", obj.etag),
        ("Last-Modified", format_datetime(obj.last_modified, usegmt=True)),
        ("Accept-Ranges", "bytes"),
    )


class S3RestApi:
    """One S3 REST request (method, Host header, request target, headers, body) to one ``Reply``."""

    def __init__(self, buckets: Buckets) -> None:
        self.buckets = buckets

    @staticmethod
    def handles(authorization: str | None) -> bool:
        """S3's requests are signed for the ``s3`` service (SigV4 scope ``.../REGION/s3/aws4_request``)."""
        return "/s3/aws4_request" in (authorization or "")

    def handle(self, method: str, host: str, target: str, content_type: str | None, body: bytes) -> Reply:
        parts = urlsplit(target)
        query = parse_qs(parts.query, keep_blank_values=True)
        bucket, key = self._address(host, parts.path)
        resource = parts.path
        try:
            if not bucket:
                raise S3Error("NotImplemented", "Listing buckets is not modelled by the emulator", 501)
            if not key:
                return self._bucket_request(method, bucket, query)
            if method == "PUT":
                if "x-amz-copy-source" in query:
                    raise S3Error("NotImplemented", "CopyObject is not modelled by the emulator", 501)
                obj = self.buckets.put(bucket, key, body, content_type or "binary/octet-stream")
                return _ok(headers=(("ETag", obj.etag),))
            if method in ("GET", "HEAD"):
                obj = self.buckets.get(bucket, key)
                if method == "HEAD":
                    return _ok(headers=(*_object_headers(obj), ("Content-Length", str(len(obj.body)))))
                return _ok(body=obj.body, headers=_object_headers(obj))
            if method == "DELETE":
                self.buckets.delete(bucket, key)
                return _ok(204)
            raise S3Error("MethodNotAllowed", f"{method} is not allowed on an object", 405)
        except S3Error as exc:
            if method == "HEAD":
                return Reply(exc.status, b"", (("x-amz-request-id", uuid.uuid4().hex[:16].upper()),))
            return _error(exc, resource)

    @staticmethod
    def _address(host: str, path: str) -> tuple[str, str]:
        hostname = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
        if hostname.endswith(".localhost"):
            return hostname[: -len(".localhost")], unquote(path.lstrip("/"))
        bucket, _, key = path.lstrip("/").partition("/")
        return unquote(bucket), unquote(key)

    def _bucket_request(self, method: str, bucket: str, query: dict[str, list[str]]) -> Reply:
        if method == "PUT":
            self.buckets.create_bucket(bucket)
            return _ok(headers=(("Location", f"/{bucket}"),))
        if method == "HEAD":
            if not self.buckets.exists(bucket):
                raise S3Error("NoSuchBucket", "The specified bucket does not exist", 404, BucketName=bucket)
            return _ok()
        if method == "GET" and query.get("list-type") == ["2"]:
            return self._list(bucket, query)
        raise S3Error("NotImplemented", f"{method} on a bucket is not modelled by the emulator", 501)

    def _list(self, bucket: str, query: dict[str, list[str]]) -> Reply:
        prefix = query.get("prefix", [""])[0]
        after = query.get("continuation-token", query.get("start-after", [""]))[0]
        try:
            limit = max(0, min(MAX_KEYS, int(query.get("max-keys", [str(MAX_KEYS)])[0])))
        except ValueError:
            raise S3Error("InvalidArgument", "max-keys must be an integer", 400) from None
        found = [(k, o) for k, o in self.buckets.keys(bucket, prefix) if k > after]
        page, more = found[:limit], len(found) > limit
        contents = "".join(
            f"<Contents><Key>{escape(k)}</Key><LastModified>{o.last_modified.strftime('%Y-%m-%dT%H:%M:%S.000Z')}"
            f"</LastModified><ETag>{escape(o.etag)}</ETag><Size>{len(o.body)}</Size>"
            "<StorageClass>STANDARD</StorageClass></Contents>"
            for k, o in page
        )
        token = f"<NextContinuationToken>{escape(page[-1][0])}</NextContinuationToken>" if more and page else ""
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{_XMLNS}"><Name>{escape(bucket)}</Name>'
            f"<Prefix>{escape(prefix)}</Prefix><KeyCount>{len(page)}</KeyCount><MaxKeys>{limit}</MaxKeys>"
            f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>{token}{contents}</ListBucketResult>"
        ).encode()
        return _ok(body=body, headers=(("Content-Type", "application/xml"),))


__all__ = ["Buckets", "S3Error", "S3Object", "S3RestApi"]
