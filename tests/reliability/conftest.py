"""The reliability tests' switch for their long variants is the suite's own (tests/conftest.py)."""

from tests.conftest import run_slow

__all__ = ["run_slow"]
