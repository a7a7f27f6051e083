"""hyperpod-scheduler: scheduled stop and start for Amazon SageMaker HyperPod clusters."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hyperpod-scheduler")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"
