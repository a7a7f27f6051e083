"""Suite-wide options. Long variants (marked slow) run with --run-slow or HYPERPOD_SCHEDULER_RUN_SLOW=1."""

from __future__ import annotations

import contextlib

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    with contextlib.suppress(ValueError):  # already declared by a nested conftest
        parser.addoption("--run-slow", action="store_true", default=False, help="also run tests marked slow")
