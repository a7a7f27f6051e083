"""The ``--run-slow`` switch: long variants of the reliability tests are skipped unless it is given.

pytest reads ``pytest_addoption`` only from conftest files it loads at start-up; when the whole suite
runs (``pytest`` from the repo root) this file is found later, so the switch is also honoured through
the environment variable ``HYPERPOD_SCHEDULER_RUN_SLOW=1`` and read defensively.
"""

from __future__ import annotations

import contextlib
import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    with contextlib.suppress(ValueError):  # already added by a conftest higher up
        parser.addoption("--run-slow", action="store_true", default=False, help="also run tests marked slow")


def run_slow(config: pytest.Config) -> bool:
    flag = bool(config.getoption("--run-slow", default=False))
    return flag or os.environ.get("HYPERPOD_SCHEDULER_RUN_SLOW") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if run_slow(config):
        return
    skip = pytest.mark.skip(reason="long variant: run with --run-slow")
    for item in items:
        if "slow" in item.keywords and "tests/reliability" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)
