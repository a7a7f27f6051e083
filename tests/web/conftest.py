from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.web.fleet import DemoFleet, demo_fleet

TOKEN = "s3cret-token-for-tests"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoFleet]:
    with demo_fleet(Path(tmp_path_factory.mktemp("dash"))) as f:
        yield f


def pytest_configure(config: pytest.Config) -> None:
    # Starlette's TestClient nags about httpx; the tests' behaviour does not depend on it.
    config.addinivalue_line("filterwarnings", "ignore:Using `httpx` with `starlette.testclient`")
