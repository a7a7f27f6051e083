"""hyperpod-scheduler: scheduled stop and start for Amazon SageMaker HyperPod clusters."""

from __future__ import annotations

import functools


@functools.cache
def _version() -> str:
    # importlib.metadata costs some 50 ms to import: only the commands that show the version pay it.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hyperpod-scheduler")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0.0.0"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return _version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
