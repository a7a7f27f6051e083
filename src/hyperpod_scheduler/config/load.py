"""Read the config file into ``Config`` and resolve every cluster's schedule, with one-line errors.

The file goes through the bounded reader (size, UTF-8, depth, aliases, duplicate keys) before any
object is built, and an error quotes no value that could be a secret (``inputs.redact``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hyperpod_scheduler.config.check import check_config
from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.config.paths import config_path as config_path  # re-exported: where it always was
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import bounded, redact


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_config(data: Any, source: str = "config") -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise UsageError(describe_validation_error(exc, source)) from None
    except (RecursionError, OverflowError) as exc:  # only data built by code, never a file, gets here
        raise UsageError(f"{source}: cannot be read: {type(exc).__name__}") from None
    check_config(config, source)  # names that mean nothing (a misspelt schedule) are refused here
    return config


def describe_validation_error(exc: ValidationError, source: str) -> str:
    """One line for a pydantic error in a config-like file: every problem with its path, and its value
    unless that could be a secret."""
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        unknown = err["type"] == "extra_forbidden"
        value = redact.shown(err.get("input"), loc, known_key=not unknown)
        shown = "" if value.startswith("<a ") or unknown else f" (value {value})"
        message = err["msg"] if not redact.secret_key(loc) else _without_input(err)
        lines.append(f"{_loc(loc)}: {message}{shown}")
    return f"{source}: " + "; ".join(lines)


def _without_input(err: Any) -> str:
    # A validator's own message may quote what it was given; under a secret key, say only the kind.
    kind = str(err.get("type", "invalid"))
    return "not valid here" if kind in ("value_error", "assertion_error") else str(err["msg"])


def load_config(explicit: str | Path | None = None) -> Config:
    """The config, or an empty one when no file exists (manual stop/start need no config)."""
    path = config_path(explicit)
    if path is None:
        return Config()
    source = f"config {path}"
    return parse_config(bounded.read_yaml(path, source), str(path))
