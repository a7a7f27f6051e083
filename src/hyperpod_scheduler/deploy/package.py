"""Build the Lambda artefact: a zip that two builds make byte for byte alike, keyed by its content hash.

- **Only what Lambda runs.** The dependencies are the project's runtime requirements less the CLI and
  dashboard ones (Typer, Rich, FastAPI, ...), pinned in ``lambda-requirements.txt`` with the hashes of
  their wheels for Lambda's platforms (``deploy lock`` rewrites it); pip installs exactly those, binary
  wheels only, for the template's platform and Python. The package's faces the Lambda never imports
  (cli, web, demo, emulator) stay out too.
- **Compiled.** Every module is compiled to bytecode with unchecked hash-based pycs (no timestamps; the
  zip is immutable) under a fixed hash seed, so a cold start does not compile and two builds match. The
  bytecode is for the building Python, so the build must run on the runtime's Python version.
- **Reproducible and content-addressed.** Sorted entries, fixed timestamps and modes; the file is named
  ``lambda-<sha256[:16]>.zip`` and that name is the template's ``CodeKey``: an upgrade is a new key, so
  CloudFormation updates the functions (a fixed key would leave the old code running).
- **Within Lambda's limits**: 250 MB unzipped (checked); 50 MB zipped only matters for direct uploads,
  and the template deploys from S3.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata, resources
from pathlib import Path

from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError

DIST_NAME = "hyperpod-scheduler"
DEFAULT_PLATFORM = "manylinux2014_aarch64"
DEFAULT_PYTHON = "3.12"
# The lock covers the template's two architectures for its default runtime.
LOCKED_PLATFORMS = ("manylinux2014_aarch64", "manylinux2014_x86_64")
LOCK_FILE = "lambda-requirements.txt"
KEY_PREFIX = "hyperpod-scheduler/"
# Runtime requirements of the package that only the CLI and the dashboard import.
NOT_IN_LAMBDA = frozenset({"typer", "rich", "fastapi", "jinja2", "uvicorn", "python-multipart", "ruamel-yaml"})
# Subpackages the Lambda never imports (faces other than deploy, and the emulator).
LEFT_OUT = frozenset({"cli", "web", "demo", "emulator"})
UNZIPPED_LIMIT = 250 * 1000 * 1000  # Lambda: 250 MB unzipped, layers included
ZIPPED_DIRECT_LIMIT = 50 * 1000 * 1000  # Lambda: 50 MB zipped for a direct upload (not through S3)
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
_SKIP_DIRS = {"__pycache__", ".mypy_cache", ".pytest_cache"}
_COMPILE = """
import py_compile, sys
from pathlib import Path
root = Path(sys.argv[1])
for src in sorted(root.rglob("*.py")):
    rel = src.relative_to(root).as_posix()
    # The pyc beside its source, named as the Lambda's import system looks for it, whatever
    # PYTHONPYCACHEPREFIX (sys.pycache_prefix) says where this machine keeps its own bytecode.
    pyc = src.parent / "__pycache__" / f"{src.stem}.{sys.implementation.cache_tag}.pyc"
    py_compile.compile(str(src), cfile=str(pyc), dfile=rel, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
"""

PipRunner = Callable[[Sequence[str]], None]


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    hashes: tuple[str, ...] = ()

    def line(self, with_hashes: bool) -> str:
        hashes = "".join(f" --hash={h}" for h in self.hashes) if with_hashes else ""
        return f"{self.name}=={self.version}{hashes}"


@dataclass(frozen=True)
class Lock:
    python: str
    platforms: tuple[str, ...]
    pins: tuple[Pin, ...]
    digest: str = field(default="", compare=False)

    def covers(self, platform: str, python: str) -> bool:
        return python == self.python and platform in self.platforms


@dataclass(frozen=True)
class Artefact:
    path: Path
    sha256: str
    files: int
    size_bytes: int
    unzipped_bytes: int

    @property
    def key(self) -> str:
        """The S3 key to upload it under, and the hub template's ``CodeKey``."""
        return KEY_PREFIX + self.path.name


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_requirements() -> list[str]:
    """The project's install requirements the Lambda needs (no extras, no CLI or dashboard ones)."""
    required = metadata.requires(DIST_NAME) or []
    plain = [r.split(";")[0].strip() for r in required if "extra ==" not in r]
    return [r for r in plain if normalise(re.split(r"[<>=!~ \[(]", r, maxsplit=1)[0]) not in NOT_IN_LAMBDA]


# ---- the lock ------------------------------------------------------------------------------------


def lock_text() -> str:
    return resources.files("hyperpod_scheduler.deploy").joinpath(LOCK_FILE).read_text("utf-8")


def parse_lock(text: str) -> Lock:
    python, platforms = "", tuple[str, ...]()  # filled from the header lines
    pins: list[Pin] = []
    for raw in text.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if line.startswith("# python:"):
            python = line.split(":", 1)[1].strip()
        elif line.startswith("# platforms:"):
            platforms = tuple(line.split(":", 1)[1].split())
        elif line and not line.startswith("#"):
            spec, *hashes = line.split()
            name, sep, version = spec.partition("==")
            if not sep:
                raise HyperpodSchedulerError(f"{LOCK_FILE}: '{spec}' is not pinned with ==")
            pins.append(Pin(normalise(name), version, tuple(h.removeprefix("--hash=") for h in hashes)))
    if not python or not platforms:
        raise HyperpodSchedulerError(f"{LOCK_FILE}: no '# python:' or '# platforms:' header")
    return Lock(python, platforms, tuple(pins), hashlib.sha256(text.encode("utf-8")).hexdigest())


def load_lock() -> Lock:
    return parse_lock(lock_text())


ReportRunner = Callable[[Sequence[str]], dict[str, object]]


def _pip_report(command: Sequence[str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="hps-lock-") as tmp:
        report = Path(tmp) / "report.json"
        done = subprocess.run([*command, "--report", str(report)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise HyperpodSchedulerError(f"deploy lock: pip failed: {last}")
        data: dict[str, object] = json.loads(report.read_text("utf-8"))
        return data


def make_lock(python: str = DEFAULT_PYTHON, platforms: Sequence[str] = LOCKED_PLATFORMS,
              report: ReportRunner = _pip_report) -> str:  # fmt: skip
    """Resolve the runtime requirements for every platform and write them pinned, with every wheel's hash."""
    versions: dict[str, str] = {}
    hashes: dict[str, set[str]] = {}
    for platform in platforms:
        with tempfile.TemporaryDirectory(prefix="hps-lock-") as tmp:
            command = [
                sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                "--target", tmp, "--platform", platform, "--python-version", python, "--implementation", "cp",
                "--only-binary=:all:", *runtime_requirements(),
            ]  # fmt: skip
            answer = report(command)
        for item in answer.get("install", []):  # type: ignore[attr-defined]
            name, version = normalise(item["metadata"]["name"]), item["metadata"]["version"]
            if versions.setdefault(name, version) != version:
                raise HyperpodSchedulerError(f"deploy lock: {name} resolves to {versions[name]} and {version}")
            for algo, digest in item["download_info"].get("archive_info", {}).get("hashes", {}).items():
                hashes.setdefault(name, set()).add(f"{algo}:{digest}")
    lines = [
        "# The Lambda's runtime dependencies: the project's requirements less the CLI and dashboard ones,",
        "# pinned with the hashes of their wheels. Written by `hyperpod-scheduler deploy lock`; do not edit.",
        f"# python: {python}",
        f"# platforms: {' '.join(platforms)}",
    ]
    for name in sorted(versions):
        lines.append(f"{name}=={versions[name]} \\")
        lines += [f"    --hash={h} \\" for h in sorted(hashes.get(name, ()))]
        lines[-1] = lines[-1].removesuffix(" \\")
    return "\n".join(lines) + "\n"


# ---- the build -----------------------------------------------------------------------------------


def pip_command(target: Path, requirements: Path, platform: str, python: str, hashes: bool) -> list[str]:
    return [
        sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--no-deps",
        "--target", str(target),
        "--platform", platform, "--python-version", python, "--implementation", "cp",
        "--only-binary=:all:", *(["--require-hashes"] if hashes else []),
        "-r", str(requirements),
    ]  # fmt: skip


def _run_pip(command: Sequence[str]) -> None:
    done = subprocess.run(list(command), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise HyperpodSchedulerError(f"deploy package: pip install failed: {last}")


def build(
    output_dir: Path,
    *,
    dependencies: bool = True,
    platform: str = DEFAULT_PLATFORM,
    python: str = DEFAULT_PYTHON,
    bytecode: bool = True,
    pip: PipRunner = _run_pip,
    lock: Lock | None = None,
) -> Artefact:
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if bytecode and running != python:
        raise UsageError(
            f"deploy package: bytecode for Python {python} needs Python {python} to build it (this is {running}); "
            f"run it with python{python}, or pass --python-version {running} and deploy LambdaRuntime=python{running}"
        )
    source = Path(__file__).resolve().parent.parent  # the hyperpod_scheduler package directory
    with tempfile.TemporaryDirectory(prefix="hps-lambda-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        if dependencies:
            lock = lock or load_lock()
            locked = lock.covers(platform, python)
            requirements = Path(tmp) / "requirements.txt"
            requirements.write_text("\n".join(p.line(with_hashes=locked) for p in lock.pins) + "\n", "utf-8")
            pip(pip_command(root, requirements, platform, python, hashes=locked))
        left_out = [*_SKIP_DIRS, "*.pyc", *LEFT_OUT]
        shutil.copytree(source, root / source.name, ignore=_ignore_at_top(source, left_out))
        _write_metadata(root, platform, python, lock)
        if bytecode:
            _compile(root)
        files = sorted(p for p in root.rglob("*") if p.is_file() and not _stray(p, root))
        unzipped = sum(p.stat().st_size for p in files)
        if unzipped > UNZIPPED_LIMIT:
            raise HyperpodSchedulerError(
                f"deploy package: {unzipped / 1e6:.0f} MB unzipped, over Lambda's {UNZIPPED_LIMIT / 1e6:.0f} MB"
            )
        output_dir.mkdir(parents=True, exist_ok=True)
        staging = output_dir / ".lambda-building.zip"
        with zipfile.ZipFile(staging, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
            for path in files:
                info = zipfile.ZipInfo(path.relative_to(root).as_posix(), _FIXED_TIME)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, path.read_bytes(), compresslevel=9)
        digest = hashlib.sha256(staging.read_bytes()).hexdigest()
        final = output_dir / f"lambda-{digest[:16]}.zip"
        os.replace(staging, final)
    return Artefact(final, digest, len(files), final.stat().st_size, unzipped)


def _ignore_at_top(source: Path, patterns: list[str]) -> Callable[[str, list[str]], set[str]]:
    base = shutil.ignore_patterns(*[p for p in patterns if p not in LEFT_OUT])

    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = set(base(directory, names))
        if Path(directory) == source:
            skipped |= {n for n in names if n in LEFT_OUT}
        return skipped

    return ignore


def _stray(path: Path, root: Path) -> bool:
    """Caches a dependency's install left behind (not its compiled bytecode, which we wrote)."""
    parts = set(path.relative_to(root).parts)
    return bool(parts & {".mypy_cache", ".pytest_cache"})


def _compile(root: Path) -> None:
    # A fixed hash seed: set and frozenset constants would otherwise be marshalled in a different order
    # in every build, and the zip would never be the same twice.
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": ""}
    env.pop("PYTHONPYCACHEPREFIX", None)  # the zip's bytecode goes in the zip, not this machine's cache
    for stale in root.rglob("__pycache__"):
        shutil.rmtree(stale)
    done = subprocess.run([sys.executable, "-c", _COMPILE, str(root)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise HyperpodSchedulerError(f"deploy package: compiling the bytecode failed: {last}")


def _write_metadata(root: Path, platform: str, python: str, lock: Lock | None) -> None:
    """A minimal dist-info, so ``hyperpod_scheduler.__version__`` reports the version in Lambda too, and
    what the zip was built for."""
    version = metadata.version(DIST_NAME)
    info = root / f"hyperpod_scheduler-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST_NAME}\nVersion: {version}\n", "utf-8")
    built = {"python": python, "platform": platform, "lock": lock.digest if lock else None, "version": version}
    (root / "hyperpod_scheduler" / "deploy" / "build.json").write_text(json.dumps(built, sort_keys=True), "utf-8")
