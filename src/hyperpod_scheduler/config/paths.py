"""Where the config file and the state store are, found without reading or opening either.

Light on purpose (os and pathlib only): `status` with nothing configured answers from these alone,
without the config's pydantic models, SQLite, the engine or botocore (issue 30). ``config.load`` and
``store.open_store`` read the same answers, so the quick look and the real one cannot disagree.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

CONFIG_ENV = "HYPERPOD_SCHEDULER_CONFIG"
DEFAULT_CONFIG_FILE = "hyperpod-scheduler.yaml"
STATE_ENV = "HYPERPOD_SCHEDULER_STATE"
MEMORY = "memory:"
SCHEDULE_TAG = "hyperpod-scheduler:schedule"  # where a tag-selected cluster says which schedule governs it

# A scheme needs two letters or more, so a Windows drive ("C:\\...") still reads as a path.
SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")


def config_path(explicit: str | Path | None) -> Path | None:
    """The config file to read: --config, then $HYPERPOD_SCHEDULER_CONFIG, then ./hyperpod-scheduler.yaml."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env)
    default = Path(DEFAULT_CONFIG_FILE)
    return default if default.exists() else None


def default_state_path() -> Path:
    """``$XDG_STATE_HOME/hyperpod-scheduler/state.sqlite``, i.e. ``~/.local/state/...`` by default."""
    base = os.environ.get("XDG_STATE_HOME") or "~/.local/state"
    return Path(base).expanduser() / "hyperpod-scheduler" / "state.sqlite"


def cache_folder() -> Path:
    """``$XDG_CACHE_HOME/hyperpod-scheduler``, i.e. ``~/.cache/hyperpod-scheduler`` by default: what can be
    found again (a kept FSx discovery), never what must not be lost (that is the state store's)."""
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "hyperpod-scheduler"


def state_location(url_or_path: str | os.PathLike[str] | None) -> str:
    """The store's location as given, else ``$HYPERPOD_SCHEDULER_STATE``; "" means the default file."""
    return str(url_or_path) if url_or_path not in (None, "") else os.environ.get(STATE_ENV, "")


def local_state(location: str) -> Path | str | None:
    """What a location names on this machine: ``MEMORY``, a SQLite file's path, or None for anything
    else (a DynamoDB table, an unknown scheme, a sqlite URL without a file: ``open_store`` judges those)."""
    if not location:
        return default_state_path()
    if location in ("memory:", "memory://"):
        return MEMORY
    if location.startswith("sqlite:"):
        path = location.removeprefix("sqlite:")
        path = path[2:] if path.startswith("//") else path
        return Path(path).expanduser() if path else None
    if SCHEME.match(location):
        return None
    return Path(location).expanduser()


def nothing_stored(url_or_path: str | os.PathLike[str] | None) -> bool:
    """Whether the store named has no record for certain without opening it: a new in-memory store, or
    a SQLite file that does not exist (yet). A control character is left to ``open_store`` to refuse."""
    location = state_location(url_or_path)
    if re.search(r"[\x00-\x1f\x7f]", location):
        return False
    found = local_state(location)
    if found == MEMORY:
        return True
    return isinstance(found, Path) and not os.path.lexists(found)
