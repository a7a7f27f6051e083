"""Read the config file into ``Config`` and resolve every cluster's schedule, with one-line errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from hyperpod_scheduler.config.check import check_config
from hyperpod_scheduler.config.model import DEFAULT_CONFIG_FILE, Config
from hyperpod_scheduler.errors import UsageError

CONFIG_ENV = "HYPERPOD_SCHEDULER_CONFIG"


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
    check_config(config, source)  # names that mean nothing (a misspelt schedule) are refused here
    return config


def describe_validation_error(exc: ValidationError, source: str) -> str:
    """One line for a pydantic error in a config-like file: every problem with its path and value."""
    lines = []
    for err in exc.errors():
        value = err.get("input")
        shown = "" if isinstance(value, dict | list) else f" (value {value!r})"
        lines.append(f"{_loc(tuple(err['loc']))}: {err['msg']}{shown}")
    return f"{source}: " + "; ".join(lines)


def config_path(explicit: str | Path | None) -> Path | None:
    """The config file to read: --config, then $HYPERPOD_SCHEDULER_CONFIG, then ./hyperpod-scheduler.yaml."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env)
    default = Path(DEFAULT_CONFIG_FILE)
    return default if default.exists() else None


def load_config(explicit: str | Path | None = None) -> Config:
    """The config, or an empty one when no file exists (manual stop/start need no config)."""
    path = config_path(explicit)
    if path is None:
        return Config()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"config {path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"config {path}:{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    return parse_config(data, str(path))
