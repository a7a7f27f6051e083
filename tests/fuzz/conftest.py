"""The fuzz suites: a bounded number of examples in CI (the whole suite in about a minute), many more with
``--run-slow`` or ``HYPERPOD_SCHEDULER_RUN_SLOW=1`` (tests/fuzz/budget.py reads the switch)."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Read before the test modules are imported, so their @settings see the long budget.
    if config.getoption("--run-slow", default=False):
        os.environ["HYPERPOD_SCHEDULER_RUN_SLOW"] = "1"
