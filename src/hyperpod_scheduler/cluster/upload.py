"""Upload a local lifecycle-script folder to the spec's SourceS3Uri, through the real S3 API.

Every group's entry point (OnCreate / OnInitComplete) is checked to exist in the folder before
anything is uploaded, so a typo never leaves a half-uploaded prefix behind.

What is uploaded is decided first, by ``plan``, and can be listed: the folder's regular files, never
through a symbolic link that leads out of the folder (a planted link to ``~/.aws/credentials`` refuses the
upload), never a FIFO or a device, and without version-control folders (``.git``, whose ``config`` may hold
a token) and dotfiles (``.env``) unless ``hidden`` asks for dotfiles.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from hyperpod_scheduler.errors import Problem, SpecError, UsageError
from hyperpod_scheduler.inputs import files
from hyperpod_scheduler.inputs.text import quoted

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


# Far above any lifecycle-script folder (the samples are a dozen files, well under 1 MiB) and far below
# a home folder or / given by mistake: the walk stops there, before anything is sent.
MAX_FILES = 1_000
MAX_BYTES = 256 * 1024 * 1024
VCS_FOLDERS = frozenset({".git", ".hg", ".svn", ".bzr", "CVS", "_darcs", ".jj", ".pijul", ".fossil"})


@dataclass(frozen=True)
class Plan:
    """What an upload of ``root`` sends (``files``, relative POSIX names, sorted) and what it leaves out."""

    root: Path
    files: tuple[str, ...]
    skipped: tuple[str, ...]  # dotfiles and version-control folders (a folder once, with a trailing /)


def plan(folder: str | Path, *, hidden: bool = False) -> Plan:
    """The files an upload of ``folder`` sends; ``UsageError`` for a link out of it or a file that is not a
    regular file. Links inside the folder are read as the file they point at; linked folders are not
    walked (whatever they hold is in the folder already, or not the folder's)."""
    root = Path(folder)
    if not root.is_dir():
        raise UsageError(f"--upload-scripts: {root} is not a folder")
    real_root = root.resolve()
    chosen: list[str] = []
    skipped: list[str] = []
    total = 0

    def refuse(rel: str, why: str) -> UsageError:
        return UsageError(f"--upload-scripts: {quoted(rel)} in {root} {why}; nothing was uploaded")

    def walk_error(exc: OSError) -> None:
        raise UsageError(f"--upload-scripts: cannot read {quoted(str(exc.filename))}: {exc.strerror or exc}")

    for here, dirs, names in os.walk(root, onerror=walk_error, followlinks=False):
        base = Path(here)
        for name in sorted(dirs):
            rel = (base / name).relative_to(root).as_posix()
            path = base / name
            if name in VCS_FOLDERS or (name.startswith(".") and not hidden):
                skipped.append(rel + "/")
                dirs.remove(name)
            elif path.is_symlink():
                if not _inside(path.resolve(), real_root):
                    raise refuse(rel, f"is a symbolic link out of the folder (to {path.resolve()})")
                skipped.append(rel + "/")  # inside: its files are uploaded under their own names
        for name in sorted(names):
            path = base / name
            rel = path.relative_to(root).as_posix()
            if name.startswith(".") and not hidden:
                skipped.append(rel)
                continue
            target = path.resolve() if path.is_symlink() else path
            if path.is_symlink() and not _inside(target, real_root):
                raise refuse(rel, f"is a symbolic link out of the folder (to {target})")
            try:
                found = target.stat()
            except OSError as exc:
                raise refuse(rel, f"cannot be read: {exc.strerror or exc}") from None
            if not stat.S_ISREG(found.st_mode):
                raise refuse(rel, f"is {files.kind(found.st_mode)}, not a regular file")
            chosen.append(rel)
            total += found.st_size
            if len(chosen) > MAX_FILES or total > MAX_BYTES:
                raise UsageError(
                    f"--upload-scripts: {root} holds more than {MAX_FILES:,} files or {MAX_BYTES // 2**20} MiB; "
                    "is it the lifecycle-script folder? Nothing was uploaded"
                )
        dirs.sort()
    return Plan(root, tuple(sorted(chosen)), tuple(sorted(skipped)))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def entry_point_problems(request: Mapping[str, Any], folder: Path, chosen: Plan | None = None) -> list[Problem]:
    """Every entry point that is not in ``folder`` (with ``chosen``: not among the files it uploads)."""
    problems = []
    for i, g in enumerate(request.get("InstanceGroups", [])):
        lcc = g.get("LifeCycleConfig") or {}
        for key in ("OnCreate", "OnInitComplete"):
            name = lcc.get(key)
            if not name:
                continue
            if chosen is not None and (folder / name).is_file() and Path(name).as_posix() not in chosen.files:
                message = f"{name!r} is in {folder} but not uploaded (a dotfile: see --upload-hidden)"
            elif not (folder / name).is_file():
                message = f"{name!r} is not in {folder}"
            else:
                continue
            problems.append(Problem(f"InstanceGroups[{i}].LifeCycleConfig.{key}", message, g.get("InstanceGroupName")))
    return problems


def upload_scripts(
    s3: S3Client,
    request: Mapping[str, Any],
    folder: str | Path,
    extra_files: Mapping[str, Any] | None = None,
    *,
    hidden: bool = False,
    on_plan: Callable[[Plan], None] = lambda _: None,
) -> list[Uploaded]:
    """Upload ``folder`` (as ``plan`` chooses its files) to every distinct SourceS3Uri of ``request``;
    ``extra_files`` (name -> JSON value) are written beside the scripts (provisioning_parameters.json for
    the legacy topology). ``on_plan`` is told what will be uploaded before anything is."""
    root = Path(folder)
    chosen = plan(root, hidden=hidden)
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
    problems = entry_point_problems(request, root, chosen)
    if problems:
        raise SpecError(problems, source=f"--upload-scripts {root}")
    on_plan(chosen)
    done = []
    for uri in uris:
        bucket, prefix = _split(uri)
        keys = []
        for rel in chosen.files:
            key = prefix + rel
            # One PutObject per file (lifecycle scripts are small): a botocore client has no upload_file.
            try:
                body = files.open_input(root / rel)  # a regular file only, whatever was swapped in since
            except OSError as exc:
                raise UsageError(f"--upload-scripts: cannot read {quoted(rel)}: {exc.strerror or exc}") from None
            with body:
                s3.put_object(Bucket=bucket, Key=key, Body=body)
            keys.append(key)
        for name, value in (extra_files or {}).items():
            key = prefix + name
            s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(value, indent=2).encode())
            keys.append(key)
        done.append(Uploaded(bucket, prefix, tuple(keys)))
    return done
