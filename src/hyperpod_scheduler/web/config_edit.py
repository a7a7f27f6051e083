"""Write an edited schedule back to the config file (the one I/O edge of the schedule grid).

The whole file is re-validated before it replaces the old one, and it is replaced atomically, so a
bad edit or a crash never leaves a config the scheduler cannot read. YAML comments are not kept.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from hyperpod_scheduler.config.load import parse_config
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule import load_schedules


def read_document(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise UsageError(f"config {path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"config {path}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"config {path}: expected a mapping at the top level")
    return data


def write_schedule(path: Path, name: str, entry: dict[str, Any]) -> None:
    """Replace schedule ``name`` in the config file at ``path`` with ``entry``."""
    data = read_document(path)
    schedules = data.get("schedules") or {}
    if name not in schedules:
        raise UsageError(f"schedule: {name!r} is not in {path} (only the config's named schedules can be edited)")
    data["schedules"] = {**schedules, name: entry}
    parse_config(data, str(path))
    load_schedules(data["schedules"])
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, allow_unicode=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"config {path}: cannot write: {exc.strerror or exc}") from None
