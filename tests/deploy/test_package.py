"""The Lambda zip: the package (handlers, templates), dependencies via pip --target, reproducible bytes."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import pytest

from hyperpod_scheduler.deploy import package
from hyperpod_scheduler.errors import HyperpodSchedulerError


def test_the_zip_holds_the_handlers_and_templates_and_imports(tmp_path: Path) -> None:
    artefact = package.build(tmp_path / "lambda.zip", dependencies=False)
    names = zipfile.ZipFile(artefact.path).namelist()
    assert "hyperpod_scheduler/deploy/handlers.py" in names
    assert "hyperpod_scheduler/deploy/templates/hub.yaml" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    unpacked = tmp_path / "unpacked"
    zipfile.ZipFile(artefact.path).extractall(unpacked)
    # Lambda imports the handler from the zip root; dependencies come from this venv here.
    probe = "import hyperpod_scheduler as p, hyperpod_scheduler.deploy.handlers as h; print(h.__file__, p.__version__)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=unpacked, capture_output=True, text=True, check=False)
    path, version = done.stdout.split()
    assert path.startswith(str(unpacked)) and version == metadata.version("hyperpod-scheduler")


def test_the_build_is_reproducible(tmp_path: Path) -> None:
    one = package.build(tmp_path / "1.zip", dependencies=False)
    two = package.build(tmp_path / "2.zip", dependencies=False)
    assert one.path.read_bytes() == two.path.read_bytes()


def test_dependencies_are_installed_for_the_lambda_platform_into_the_zip(tmp_path: Path) -> None:
    seen: list[Sequence[str]] = []

    def fake_pip(command: Sequence[str]) -> None:
        seen.append(command)
        target = Path(command[command.index("--target") + 1])
        (target / "pydantic").mkdir(parents=True)
        (target / "pydantic" / "__init__.py").write_text("")

    artefact = package.build(tmp_path / "lambda.zip", pip=fake_pip)
    (command,) = seen
    assert command[command.index("--platform") + 1] == "manylinux2014_aarch64"
    assert command[command.index("--python-version") + 1] == "3.12"
    assert "--only-binary=:all:" in command
    assert any(r.startswith("pydantic") for r in command) and not any(r.startswith("pytest") for r in command)
    assert "pydantic/__init__.py" in zipfile.ZipFile(artefact.path).namelist()


def test_a_failed_pip_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(command: Sequence[str], **_: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution found for pydantic\n")

    monkeypatch.setattr(subprocess, "run", failing)
    with pytest.raises(HyperpodSchedulerError, match="pip install failed: ERROR: No matching distribution"):
        package.build(tmp_path / "lambda.zip")
