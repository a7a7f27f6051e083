"""Fixtures of the Slurm tests. ``shared``: a folder standing for shared storage (/fsx). It cannot live
under /tmp, where pytest's tmp_path is, because /tmp is instance-local storage to the audit."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SHARED_ROOT = "/var/tmp"


@pytest.fixture
def shared() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="hyperpod-ckpt-", dir=SHARED_ROOT))
    path.chmod(0o777)  # Slurm jobs may run as another user
    yield path
    shutil.rmtree(path, ignore_errors=True)
