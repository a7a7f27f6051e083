"""Build the Lambda artefact: a zip with the package and (unless told not to) its dependencies.

Dependencies are installed with ``pip install --target`` for the Lambda platform (Linux, the
template's arm64, CPython 3.12), binary wheels only, so the zip built on a laptop runs in Lambda.
The zip is reproducible: sorted entries and fixed timestamps, so an unchanged build uploads
byte-identical and CloudFormation sees no change.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from hyperpod_scheduler.errors import HyperpodSchedulerError

DIST_NAME = "hyperpod-scheduler"
DEFAULT_PLATFORM = "manylinux2014_aarch64"
DEFAULT_PYTHON = "3.12"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
_SKIP_DIRS = {"__pycache__", ".mypy_cache", ".pytest_cache"}

PipRunner = Callable[[Sequence[str]], None]


@dataclass(frozen=True)
class Artefact:
    path: Path
    files: int
    size_bytes: int


def runtime_requirements() -> list[str]:
    """The project's install requirements, without extras (dev tools never ship)."""
    required = metadata.requires(DIST_NAME) or []
    return [r.split(";")[0].strip() for r in required if "extra ==" not in r]


def pip_command(target: Path, requirements: Sequence[str], platform: str, python: str) -> list[str]:
    return [
        sys.executable, "-m", "pip", "install", "--quiet", "--no-compile",
        "--target", str(target),
        "--platform", platform, "--python-version", python, "--implementation", "cp",
        "--only-binary=:all:", "--upgrade",
        *requirements,
    ]  # fmt: skip


def _run_pip(command: Sequence[str]) -> None:
    done = subprocess.run(list(command), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise HyperpodSchedulerError(f"deploy package: pip install failed: {last}")


def build(
    output: Path,
    *,
    dependencies: bool = True,
    platform: str = DEFAULT_PLATFORM,
    python: str = DEFAULT_PYTHON,
    pip: PipRunner = _run_pip,
) -> Artefact:
    source = Path(__file__).resolve().parent.parent  # the hyperpod_scheduler package directory
    with tempfile.TemporaryDirectory(prefix="hps-lambda-") as tmp:
        root = Path(tmp)
        if dependencies:
            pip(pip_command(root, runtime_requirements(), platform, python))
        shutil.copytree(source, root / source.name, ignore=shutil.ignore_patterns(*_SKIP_DIRS, "*.pyc"))
        _write_metadata(root)
        files = sorted(p for p in root.rglob("*") if p.is_file() and not _SKIP_DIRS & set(p.parts))
        output.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(output, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for path in files:
                info = zipfile.ZipInfo(path.relative_to(root).as_posix(), _FIXED_TIME)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, path.read_bytes())
    return Artefact(output, len(files), output.stat().st_size)


def _write_metadata(root: Path) -> None:
    """A minimal dist-info, so ``hyperpod_scheduler.__version__`` reports the version in Lambda too."""
    version = metadata.version(DIST_NAME)
    info = root / f"hyperpod_scheduler-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST_NAME}\nVersion: {version}\n", "utf-8")
