"""The emulator of the answer, deadline and watchdog checks: served over loopback HTTP only, since these
tests are about the wire (a proxy that garbles answers, the bounded sender, the socket watchdog)."""

from __future__ import annotations

import pytest

from hyperpod_scheduler.emulator import Emulator
from tests.engine.conftest import served_emu

__all__ = ["emu", "served_emu"]


@pytest.fixture
def emu(served_emu: Emulator) -> Emulator:
    return served_emu
