"""The emulator fixture of the engine tests, for the answer checks."""

from tests.engine.conftest import emu

__all__ = ["emu"]
