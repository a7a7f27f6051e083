from tests.engine.conftest import counting, emu, module_emulator  # noqa: F401  (shared fixtures)
