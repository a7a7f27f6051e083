"""Upload a local lifecycle-script folder to the spec's SourceS3Uri, through the real S3 API.

Every group's entry point (OnCreate / OnInitComplete) is checked to exist in the folder before
anything is uploaded, so a typo never leaves a half-uploaded prefix behind.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from hyperpod_scheduler.errors import Problem, SpecError, UsageError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


@dataclass(frozen=True)
class Uploaded:
    bucket: str
    prefix: str
    keys: tuple[str, ...]


def _split(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise UsageError(f"SourceS3Uri {uri!r}: --upload-scripts needs an s3://bucket/prefix URI")
    prefix = parsed.path.lstrip("/")
    return parsed.netloc, prefix if not prefix or prefix.endswith("/") else prefix + "/"


def entry_point_problems(request: Mapping[str, Any], folder: Path) -> list[Problem]:
    problems = []
    for i, g in enumerate(request.get("InstanceGroups", [])):
        lcc = g.get("LifeCycleConfig") or {}
        for key in ("OnCreate", "OnInitComplete"):
            name = lcc.get(key)
            if name and not (folder / name).is_file():
                problems.append(
                    Problem(
                        f"InstanceGroups[{i}].LifeCycleConfig.{key}",
                        f"{name!r} is not in {folder}",
                        g.get("InstanceGroupName"),
                    )
                )
    return problems


def upload_scripts(
    s3: S3Client, request: Mapping[str, Any], folder: str | Path, extra_files: Mapping[str, Any] | None = None
) -> list[Uploaded]:
    """Upload ``folder`` to every distinct SourceS3Uri of ``request``; ``extra_files`` (name -> JSON value)
    are written beside the scripts (provisioning_parameters.json for the legacy topology)."""
    root = Path(folder)
    if not root.is_dir():
        raise UsageError(f"--upload-scripts: {root} is not a folder")
    uris = sorted(
        {
            g["LifeCycleConfig"]["SourceS3Uri"]
            for g in request.get("InstanceGroups", [])
            if (g.get("LifeCycleConfig") or {}).get("SourceS3Uri")
        }
    )
    if not uris:
        raise UsageError(
            "--upload-scripts: no group has a LifeCycleConfig with SourceS3Uri (AMI-based clusters need no scripts)"
        )
    problems = entry_point_problems(request, root)
    if problems:
        raise SpecError(problems, source=f"--upload-scripts {root}")
    files = sorted(p for p in root.rglob("*") if p.is_file())
    done = []
    for uri in uris:
        bucket, prefix = _split(uri)
        keys = []
        for path in files:
            key = prefix + path.relative_to(root).as_posix()
            # One PutObject per file (lifecycle scripts are small): a botocore client has no upload_file.
            with path.open("rb") as body:
                s3.put_object(Bucket=bucket, Key=key, Body=body)
            keys.append(key)
        for name, value in (extra_files or {}).items():
            key = prefix + name
            s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(value, indent=2).encode())
            keys.append(key)
        done.append(Uploaded(bucket, prefix, tuple(keys)))
    return done
