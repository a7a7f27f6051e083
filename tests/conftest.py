"""Suite-wide options. Long variants (marked ``slow``, a marker declared in pyproject.toml) are skipped
unless ``--run-slow`` is given or ``HYPERPOD_SCHEDULER_RUN_SLOW=1`` is set; this file is the one place
that reads the switch (tests/fuzz/budget.py sees it through the environment variable)."""

from __future__ import annotations

import os

import pytest

from hyperpod_scheduler.emulator import in_process

RUN_SLOW_ENV = "HYPERPOD_SCHEDULER_RUN_SLOW"


# Before any botocore session exists: every client can then be answered in process by an emulator
# started with in_process=True (the sessions product code caches for the whole run included).
in_process.install()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False, help="also run tests marked slow")


def run_slow(config: pytest.Config) -> bool:
    return bool(config.getoption("--run-slow", default=False)) or os.environ.get(RUN_SLOW_ENV) == "1"


# `slow` is declared in pyproject.toml (once: the three conftests that each declared --run-slow are
# now this one); the markers scripts/test.sh selects its stages by are declared here.
MARKERS = (
    "browser: drives Chromium (its own stage of scripts/test.sh; not in --quick)",
    "real_slurm: needs the real Slurm scripts/slurm-ci.sh starts (not in --quick)",
    "long_run: a long Hypothesis state-machine run (not in --quick)",
)


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    # Set before the test modules are imported, so the fuzz suites' @settings see the long budget.
    if config.getoption("--run-slow", default=False):
        os.environ[RUN_SLOW_ENV] = "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if run_slow(config):
        return
    skip = pytest.mark.skip(reason="long variant: run with --run-slow")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)
