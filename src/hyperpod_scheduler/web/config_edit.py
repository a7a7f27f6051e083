"""Write an edited schedule back to the config file (the one I/O edge of the schedule grid).

The file is people's own: the edit goes through a round-trip YAML parser so their comments, key order,
quoting and indentation survive; only the edited schedule's body is rewritten. What will be written is
re-validated as a whole before it replaces the old file, atomically and with the old file's
permissions, so a bad edit or a crash never leaves a config the scheduler cannot read.
"""

from __future__ import annotations

import difflib
import io
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError as RoundTripError

from hyperpod_scheduler.config.load import parse_config
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import bounded
from hyperpod_scheduler.schedule import load_schedules

# (mapping indent, sequence indent, dash offset): the common block styles. ruamel cannot detect a
# file's style, so the one that reproduces the file unchanged is chosen.
_STYLES = ((2, 2, 0), (2, 4, 2), (4, 4, 0), (4, 6, 2))


def read_document(path: Path) -> dict[str, Any]:
    data = bounded.read_yaml(path, f"config {path}") or {}
    if not isinstance(data, dict):
        raise UsageError(f"config {path}: expected a mapping at the top level")
    return data


def write_schedule(path: Path, name: str, entry: dict[str, Any]) -> None:
    """Replace schedule ``name`` in the config file at ``path`` with ``entry``."""
    try:
        original = path.read_text(encoding="utf-8")
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError as exc:
        raise UsageError(f"config {path}: cannot read: {exc.strerror or exc}") from None
    text = _edited(path, original, name, entry)
    data = bounded.load_yaml(text, f"config {path}")  # validate exactly what is about to be written
    parse_config(data, str(path))
    load_schedules(data["schedules"])
    _replace(path, text, mode)


def _edited(path: Path, original: str, name: str, entry: dict[str, Any]) -> str:
    rt = _round_trip(original)
    try:
        doc = rt.load(original)
    except RoundTripError as exc:
        raise UsageError(f"config {path}: invalid YAML: {exc}") from None
    schedules = doc.get("schedules") if isinstance(doc, dict) else None
    if not isinstance(schedules, dict) or name not in schedules:
        raise UsageError(f"schedule: {name!r} is not in {path} (only the config's named schedules can be edited)")
    schedules[name] = entry
    return _dump(rt, doc)


def _round_trip(original: str) -> YAML:
    """A round-trip parser set to the file's own indentation style."""
    best: tuple[float, YAML] | None = None
    for mapping, sequence, offset in _STYLES:
        rt = YAML()
        rt.preserve_quotes = True
        rt.width = 4096  # never re-wrap people's long lines
        rt.indent(mapping=mapping, sequence=sequence, offset=offset)
        try:
            again = _dump(rt, rt.load(original))
        except RoundTripError:
            return rt  # the caller reports the YAML error
        if again == original:
            return rt
        score = difflib.SequenceMatcher(None, original.splitlines(), again.splitlines()).ratio()
        if best is None or score > best[0]:
            best = (score, rt)
    assert best is not None
    return best[1]


def _dump(rt: YAML, doc: Any) -> str:
    out = io.StringIO()
    rt.dump(doc, out)
    return out.getvalue()


def _replace(path: Path, text: str, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)  # mkstemp makes it 0600; keep whatever the owner chose
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"config {path}: cannot write: {exc.strerror or exc}") from None
