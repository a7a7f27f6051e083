from tests.engine.conftest import counting, emu  # noqa: F401  (shared fixtures)
