"""The Lambda zip: only runtime dependencies, from the lock; compiled; reproducible; named by its hash;
within Lambda's limits."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from hyperpod_scheduler.deploy import package
from hyperpod_scheduler.errors import HyperpodSchedulerError

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"


def build(tmp_path: Path, **kw: object) -> package.Artefact:
    return package.build(tmp_path, **{"dependencies": False, "python": HERE, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize("prefix", [False, True], ids=["plain", "pycache-prefix"])
def test_the_zip_holds_the_handlers_compiled_and_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: bool
) -> None:
    if prefix:  # a machine that keeps its bytecode elsewhere must still ship it inside the zip
        monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "elsewhere"))
    else:
        monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    artefact = build(tmp_path / "out")
    names = zipfile.ZipFile(artefact.path).namelist()
    assert "hyperpod_scheduler/deploy/handlers.py" in names
    tag = sys.implementation.cache_tag
    assert f"hyperpod_scheduler/deploy/__pycache__/handlers.{tag}.pyc" in names
    sources = [n for n in names if n.endswith(".py")]
    assert all(f"{n.rsplit('/', 1)[0]}/__pycache__/{n.rsplit('/', 1)[1][:-3]}.{tag}.pyc" in names for n in sources)
    # The faces a Lambda never imports stay out.
    assert not [n for n in names if n.split("/")[1:2] in (["cli"], ["web"], ["demo"], ["emulator"])]
    unpacked = tmp_path / "unpacked"
    zipfile.ZipFile(artefact.path).extractall(unpacked)
    probe = "import hyperpod_scheduler as p, hyperpod_scheduler.deploy.handlers as h; print(h.__file__, p.__version__)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=unpacked, capture_output=True, text=True, check=False)
    path, version = done.stdout.split()
    assert path.startswith(str(unpacked)) and version == metadata.version("hyperpod-scheduler")


def test_two_builds_match_byte_for_byte_and_the_name_is_the_content_hash(tmp_path: Path) -> None:
    one = build(tmp_path / "1")
    two = build(tmp_path / "2")
    assert one.path.read_bytes() == two.path.read_bytes()
    assert one.path.name == f"lambda-{one.sha256[:16]}.zip" and one.key == f"hyperpod-scheduler/{one.path.name}"
    bare = build(tmp_path / "3", bytecode=False)  # other bytes, so another key: CloudFormation sees the change
    assert bare.key != one.key


def test_the_bytecode_is_for_the_building_python_or_the_build_refuses() -> None:
    other = "3.12" if HERE != "3.12" else "3.13"
    with pytest.raises(HyperpodSchedulerError, match=f"bytecode for Python {other} needs Python {other}") as err:
        package.build(Path("/nonexistent"), dependencies=False, python=other)
    assert "\n" not in str(err.value)


def test_the_lock_pins_every_runtime_requirement_and_nothing_the_lambda_does_not_run() -> None:
    lock = package.load_lock()
    pins = {p.name: p for p in lock.pins}
    for text in package.runtime_requirements():
        req = Requirement(text)
        pin = pins[package.normalise(req.name)]
        assert req.specifier.contains(pin.version), (text, pin.version)
    assert not set(pins) & package.NOT_IN_LAMBDA  # no Typer, Rich, FastAPI, ...
    assert all(p.hashes for p in lock.pins)
    # Binary wheels differ per platform: each of those pins carries one hash per locked platform.
    assert len(pins["pydantic-core"].hashes) == len(lock.platforms) == 2
    assert lock.covers(package.DEFAULT_PLATFORM, package.DEFAULT_PYTHON)


def _fake_pip(seen: list[Sequence[str]]) -> package.PipRunner:
    def pip(command: Sequence[str]) -> None:
        seen.append([*command, Path(command[command.index("-r") + 1]).read_text()])
        target = Path(command[command.index("--target") + 1])
        (target / "pydantic").mkdir(parents=True)
        (target / "pydantic" / "__init__.py").write_text("")

    return pip


def test_dependencies_come_from_the_lock_with_hashes_for_the_lambda_platform(tmp_path: Path) -> None:
    seen: list[Sequence[str]] = []
    lock = package.Lock(HERE, ("manylinux2014_aarch64",), (package.Pin("pydantic", "2.14.4", ("sha256:ab",)),))
    artefact = package.build(tmp_path, platform="manylinux2014_aarch64", python=HERE, pip=_fake_pip(seen), lock=lock)
    (command,) = seen
    assert command[command.index("--platform") + 1] == "manylinux2014_aarch64"
    assert "--only-binary=:all:" in command and "--require-hashes" in command and "--no-deps" in command
    assert command[-1].strip() == "pydantic==2.14.4 --hash=sha256:ab"
    assert "pydantic/__init__.py" in zipfile.ZipFile(artefact.path).namelist()
    # For a platform the lock has no hashes for (a local test build), the same pins without them.
    seen.clear()
    package.build(tmp_path / "local", platform="manylinux2014_x86_64", python=HERE, pip=_fake_pip(seen), lock=lock)
    assert "--require-hashes" not in seen[0] and seen[0][-1].strip() == "pydantic==2.14.4"


def test_a_zip_over_lambdas_unzipped_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(package, "UNZIPPED_LIMIT", 1000)
    with pytest.raises(HyperpodSchedulerError, match="MB unzipped, over Lambda's"):
        build(tmp_path)
    assert not list(tmp_path.glob("*.zip"))


def test_a_failed_pip_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(command: Sequence[str], **_: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution found for pydantic\n")

    monkeypatch.setattr(subprocess, "run", failing)
    with pytest.raises(HyperpodSchedulerError, match="pip install failed: ERROR: No matching distribution"):
        package.build(tmp_path, python=HERE, bytecode=False)


def test_a_lock_is_written_from_pips_resolution_for_every_platform() -> None:
    def report(command: Sequence[str]) -> dict[str, object]:
        platform = command[command.index("--platform") + 1]
        wheel = {"metadata": {"name": "PyYAML", "version": "6.0.4"},
                 "download_info": {"archive_info": {"hashes": {"sha256": platform[-6:]}}}}  # fmt: skip
        pure = {"metadata": {"name": "six", "version": "1.17.0"},
                "download_info": {"archive_info": {"hashes": {"sha256": "same"}}}}  # fmt: skip
        return {"install": [wheel, pure]}

    text = package.make_lock(report=report)
    lock = package.parse_lock(text)
    assert {p.name: p.hashes for p in lock.pins} == {
        "pyyaml": ("sha256:arch64", "sha256:x86_64"),
        "six": ("sha256:same",),
    }
    assert lock.platforms == package.LOCKED_PLATFORMS and lock.python == package.DEFAULT_PYTHON
