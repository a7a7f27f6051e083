"""Fixtures for the emulator suite: a running emulator on a virtual clock, reached only through boto3.

``emu`` answers this process's botocore in process (one emulator per module, renewed between tests);
``served_emu`` is reached over loopback HTTP only, for the tests about the wire (test_wire.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.emulator.clients import T0, make_client


@pytest.fixture(scope="module")
def module_emulator() -> Iterator[Emulator]:
    # check_answers: every answer must fit its botocore output shape, or the test fails.
    with running_emulator(virtual_start=T0, seed=7, check_answers=True, in_process=True) as emulator:
        yield emulator


@pytest.fixture
def emu(module_emulator: Emulator) -> Iterator[Emulator]:
    yield module_emulator
    problems = module_emulator.answer_problems
    module_emulator.renew()
    assert problems == []


@pytest.fixture
def served_emu() -> Iterator[Emulator]:
    with running_emulator(virtual_start=T0, seed=7, check_answers=True) as emulator:
        yield emulator
        assert emulator.answer_problems == []


@pytest.fixture
def sm(emu: Emulator) -> Any:
    return make_client(emu.endpoint)


@pytest.fixture
def client_for(emu: Emulator) -> Callable[..., Any]:
    return lambda **kw: make_client(emu.endpoint, **kw)
