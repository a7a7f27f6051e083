"""Fixtures for the emulator suite: a running emulator on a virtual clock, reached only through boto3."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.emulator.clients import T0, make_client


@pytest.fixture
def emu() -> Iterator[Emulator]:
    # check_answers: every answer must fit its botocore output shape, or the test fails.
    with running_emulator(virtual_start=T0, seed=7, check_answers=True) as emulator:
        yield emulator
        assert emulator.answer_problems == []


@pytest.fixture
def sm(emu: Emulator) -> Any:
    return make_client(emu.endpoint)


@pytest.fixture
def client_for(emu: Emulator) -> Callable[..., Any]:
    return lambda **kw: make_client(emu.endpoint, **kw)
