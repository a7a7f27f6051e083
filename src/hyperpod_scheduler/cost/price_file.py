"""``prices update``'s edge: merge a Price List answer into the user's override file.

The override file is the user's own (negotiated rates, other regions), so rows they wrote stay: a row
is replaced only when it came from an earlier ``prices update`` (its source names the Price List API),
unless ``overwrite`` says otherwise. YAML files go through a round-trip parser so comments and order
survive; the file is checked by the same parser the report uses before it replaces the old one,
atomically.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from hyperpod_scheduler.cost.pricelist import API_SOURCE
from hyperpod_scheduler.cost.prices import PriceTable, load_file
from hyperpod_scheduler.errors import UsageError

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
    as_json = path.suffix.lower() == ".json"
    yaml = YAML()
    yaml.preserve_quotes = True
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except OSError as exc:
        raise UsageError(f"price file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        doc = (json.loads(text, parse_constant=_no_constant) if as_json else yaml.load(text)) if text.strip() else {}
    except (ValueError, YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(
            f"price file {str(path)!r}: not {'JSON' if as_json else 'YAML'} ({first}); left as it was"
        ) from None
    if doc is None:
        doc = {}
    if not isinstance(doc, MutableMapping):
        raise UsageError(f"price file {str(path)!r}: not a mapping; left as it was")
    result = merge(doc, fetched, overwrite)
    result.path = path
    if as_json:
        out = json.dumps(doc, indent=2, default=str, allow_nan=False) + "\n"
    else:
        buffer = io.StringIO()
        yaml.dump(doc, buffer)
        out = buffer.getvalue()
    _replace_checked(path, out)
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _replace_checked(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        # What the report will read: refuse to leave a file it could not, naming the user's file.
        load_file(tmp, shown=path)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = ["NOTE", "Updated", "merge", "update_file"]
