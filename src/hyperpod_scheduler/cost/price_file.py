"""``prices update``'s edge: merge a Price List answer into the user's override file.

The override file is the user's own (negotiated rates, other regions), so rows they wrote stay: a row
is replaced only when it came from an earlier ``prices update`` (its source names the Price List API),
unless ``overwrite`` says otherwise. YAML files go through a round-trip parser so comments and order
survive; the file is read by the bounded reader (a regular file, UTF-8, no tags), and the new one is checked by
the same parser the report uses before it replaces the old one, atomically (``inputs.files``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from hyperpod_scheduler.cost.pricelist import API_SOURCE
from hyperpod_scheduler.cost.prices import PriceTable, load_file
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import bounded, files

NOTE = (
    "Rows whose source names the AWS Price List API are rewritten by `hyperpod-scheduler prices update`; "
    "rows with any other source are yours and are kept."
)


@dataclass
class Updated:
    path: Path
    written: dict[str, int] = field(default_factory=dict)  # section -> rows written
    kept: list[str] = field(default_factory=list)  # "section key" of the user's own rows left as they were


def _from_api(row: Any, file_source: str) -> bool:
    source = row.get("source") if isinstance(row, Mapping) else None
    return str(source or file_source).startswith(API_SOURCE)


def merge(doc: MutableMapping[str, Any], fetched: PriceTable, overwrite: bool = False) -> Updated:
    """Write ``fetched`` into ``doc`` (an override file's mapping) in place."""
    result = Updated(Path())
    file_source = str(doc.get("source") or "")
    doc.setdefault("note", NOTE)
    for section, rows in (("instance_hourly", fetched.instance_hourly), ("fsx_gb_month", fetched.fsx_gb_month)):
        if not rows:
            continue
        existing = doc.get(section)
        if not isinstance(existing, MutableMapping):
            existing = {}
            doc[section] = existing
        count = 0
        for key in sorted(rows):
            price = rows[key]
            if key in existing and not overwrite and not _from_api(existing[key], file_source):
                result.kept.append(f"{section} {key}")
                continue
            existing[key] = {"usd": price.usd, "source": price.source, "as_of": price.as_of}
            count += 1
        result.written[section] = count
    return result


def update_file(path: Path, fetched: PriceTable, overwrite: bool = False) -> Updated:
    """Merge ``fetched`` into the file at ``path`` (created if absent); YAML unless it ends in .json."""
    check_target(path)
    as_json = path.suffix.lower() == ".json"
    label = f"price file {str(path)!r}"
    try:
        text = bounded.decode(bounded.read_bytes(path, label), label)  # bounded, regular files only, UTF-8
    except bounded.MissingFile:
        text = ""
    except bounded.Unreadable as exc:
        raise UsageError(f"{label}: {exc.problem}") from None
    yaml = YAML()
    yaml.preserve_quotes = True
    try:
        if text.strip():
            # The checked reader first (tags, aliases, depth, duplicate keys), then the round trip that keeps
            # comments: ruamel builds what a tag says, as PyYAML does.
            (bounded.load_json if as_json else bounded.load_yaml)(text, label)
        doc = (json.loads(text, parse_constant=_no_constant) if as_json else yaml.load(text)) if text.strip() else {}
    except (ValueError, YAMLError, bounded.BadDocument) as exc:
        if isinstance(exc, bounded.BadDocument):
            first = f"{exc.where}{exc.problem}"
        else:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{label}: not {'JSON' if as_json else 'YAML'} ({first}); left as it was") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, MutableMapping):
        raise UsageError(f"{label}: not a mapping; left as it was")
    result = merge(doc, fetched, overwrite)
    result.path = path
    if as_json:
        out = json.dumps(doc, indent=2, default=str, allow_nan=False) + "\n"
    else:
        buffer = io.StringIO()
        yaml.dump(doc, buffer)
        out = buffer.getvalue()
    # What the report will read is checked before it replaces the file: never leave one it could not read.
    # ``shown``: a refusal names the user's file, not the temporary one beside it.
    files.write_text(path, out, "--file", make_folders=True, check=lambda tmp: load_file(tmp, shown=path))
    return result


def check_target(path: Path) -> None:
    """Refuse, before anything is fetched, a --file that is not a regular file (a device, a FIFO, a link)."""
    files.writable_target(path, "--file", make_folders=False, missing_folder_ok=True)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


__all__ = ["NOTE", "Updated", "merge", "update_file"]
