"""Suite-wide options. Long variants (marked ``slow``, a marker declared in pyproject.toml) are skipped
unless ``--run-slow`` is given or ``HYPERPOD_SCHEDULER_RUN_SLOW=1`` is set; this file is the one place
that reads the switch (tests/fuzz/budget.py sees it through the environment variable)."""

from __future__ import annotations

import itertools
import os
import re
import weakref
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import boto3
import pytest
from _pytest.mark.expression import Expression
from hypothesis import settings

from hyperpod_scheduler.aws.model import botocore_session
from hyperpod_scheduler.emulator import in_process
from hyperpod_scheduler.web.core import DashboardCore
from tests import offline

# No per-example deadline anywhere: an example's time depends on the machine's load (CI has 2 shared
# cores), so a deadline makes a property fail under load, a flaky test. Speed is measured in bench/.
settings.register_profile("project", deadline=None)
settings.load_profile("project")

RUN_SLOW_ENV = "HYPERPOD_SCHEDULER_RUN_SLOW"


# Before any botocore session exists: every client can then be answered in process by an emulator
# started with in_process=True (the sessions product code caches for the whole run included).
in_process.install()
# And before any client asks the credential chain: nothing reaches past loopback (tests/offline.py).
offline.guard()


# Every dashboard a test makes, so its work beside requests ends with the test: a refresh left reading
# went on past the test's end (its moto mock, its environment), to real AWS endpoints and into the next
# test. ``Looks.close`` leaves the looks usable, so a module's dashboard serves its next test as before.
_dashboards: list[weakref.ref[DashboardCore]] = []
_made = DashboardCore.__init__


def _noted(self: DashboardCore, *args: Any, **kwargs: Any) -> None:
    _made(self, *args, **kwargs)
    _dashboards.append(weakref.ref(self))


DashboardCore.__init__ = _noted  # type: ignore[method-assign]


def _end_work_beside() -> None:
    live = [d for d in (ref() for ref in _dashboards) if d is not None]
    _dashboards[:] = [weakref.ref(d) for d in live]
    for dash in live:
        dash.looks.close(timeout_s=30)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _end_work_beside()  # before the test's fixtures end: its emulator, moto's mock, its environment
    yield


@pytest.fixture(autouse=True)
def _stays_on_loopback() -> Iterator[None]:
    # What a module or session fixture set up for this test tried is in too (set up before this one):
    # not cleared here, or it would pass unseen. A thread an earlier test left is named in the message.
    yield
    tried = offline.taken()
    if tried:
        pytest.fail(f"reached past loopback: {', '.join(tried[:3])}", pytrace=False)


@pytest.fixture(autouse=True, scope="session")
def _stayed_on_loopback() -> Iterator[None]:
    yield  # torn down last: what the wider fixtures' teardowns tried
    tried = offline.taken()
    if tried:
        pytest.fail(f"reached past loopback after the last test: {', '.join(tried[:3])}", pytrace=False)


def pytest_collection_finish(session: pytest.Session) -> None:
    tried = offline.taken()
    if tried:
        raise pytest.UsageError(f"importing the tests reached past loopback: {', '.join(tried[:3])}")


def _default_session_on_shared_models(**kwargs: Any) -> None:
    """boto3's default session (``boto3.client(...)``), on the process's shared service models. moto's
    mock sets ``boto3.DEFAULT_SESSION`` to None at each start, so every moto-backed test built a default
    session with a loader of its own and decoded the DynamoDB, SQS, S3 and STS models again (a fifth of a
    second or more each time). Still a new session each time: its own credentials, config and events."""
    kwargs.setdefault("botocore_session", botocore_session())
    _setup_default_session(**kwargs)


_setup_default_session = boto3.setup_default_session
boto3.setup_default_session = _default_session_on_shared_models


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
    "outer: the outer loop (the full run only, not --quick): set on the modules in OUTER below",
)

# The modules whose subject is a process, a port or a whole fleet end to end, and that cost seconds a
# test however they are written: the CLI or the demo as a child (the tour, the crash and concurrency
# tests, secrets, loopback, the dashboard command), a build of the deployment zip, cfn-lint, the fleet on
# moto over simulated days, endpoints that drip until a deadline passes, the fuzzers of whole files.
# They run in every full run and in CI; --quick (scripts/test.sh, docs/testing.md) leaves them out so the
# inner loop stays near a minute. Measured with --durations (2026-12-02): together about two thirds of
# the main stage's time, a tenth of its tests.
OUTER = frozenset(
    {
        "tests/aws/test_deadlines.py",
        "tests/cli/test_tour.py",
        "tests/cost/test_loopback.py",
        "tests/deploy/test_concurrency.py",
        "tests/deploy/test_fanout.py",
        "tests/deploy/test_handlers_fleet.py",
        "tests/deploy/test_parity.py",
        "tests/deploy/test_stale.py",
        "tests/deploy/test_templates.py",
        "tests/deploy/test_zip_end_to_end.py",
        "tests/emulator/test_serve.py",
        "tests/fuzz/test_fuzz_files.py",
        "tests/reliability/test_concurrency.py",
        "tests/reliability/test_crash_points.py",
        "tests/reliability/test_faults.py",
        "tests/reliability/test_hostile_world.py",
        "tests/reliability/test_secrets.py",
        "tests/web/test_demo_dashboard.py",
        "tests/web/test_slowloris.py",
    }
)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    # Set before the test modules are imported, so the fuzz suites' @settings see the long budget.
    if config.getoption("--run-slow", default=False):
        os.environ[RUN_SLOW_ENV] = "1"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # Under --quick's `-m "... not outer"` every test of an OUTER module is deselected anyway: not importing
    # those modules at all spares each xdist worker their imports (cfn-lint alone brings sympy, a second
    # or two of CPU per worker). The same tests pass; only the deselected count in the summary is smaller.
    if os.path.relpath(str(collection_path), ROOT) in OUTER and _outer_ruled_out(config.getoption("markexpr") or ""):
        return True
    return None


@cache
def _outer_ruled_out(markexpr: str) -> bool:
    """Whether ``-m markexpr`` deselects every test marked ``outer``, whatever other markers it has."""
    if not markexpr:
        return False
    others = sorted(set(re.findall(r"[A-Za-z_]\w*", markexpr)) - {"and", "or", "not", "outer"})
    if len(others) > 12:  # too many combinations to try: collect as usual
        return False
    expression = Expression.compile(markexpr)
    for values in itertools.product((False, True), repeat=len(others)):
        on = {"outer", *(name for name, v in zip(others, values, strict=True) if v)}
        if expression.evaluate(_matcher(on)):
            return False
    return True


def _matcher(on: set[str]) -> Callable[..., bool]:
    return lambda name, /, **_: name in on


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    outer = pytest.mark.outer
    for item in items:
        if os.path.relpath(str(item.path), ROOT) in OUTER:
            item.add_marker(outer)
    if run_slow(config):
        return
    skip = pytest.mark.skip(reason="long variant: run with --run-slow")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)
