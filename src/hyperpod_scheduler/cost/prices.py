"""Price tables: instance prices per hour and FSx for Lustre prices per GB-month, each with its source.

A table is plain data. Tables are layered with ``layer`` (later wins), so the order "bundled, then
the Price List answer, then the user's override file" is one expression and every price keeps the
name of the layer it came from, which the report prints beside the figures.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from hyperpod_scheduler.errors import UsageError

HOURS_PER_MONTH = 730.0  # AWS bills GB-month prices over a 730-hour month
DEPLOYMENT_TYPES = ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
_FSX_KEY = re.compile(r"^(SCRATCH_1|SCRATCH_2|PERSISTENT_1|PERSISTENT_2)(/[1-9][0-9]*)?$")
_INSTANCE = re.compile(r"^ml\.[a-z0-9-]+\.[a-z0-9]+$")


class Price(NamedTuple):
    usd: float
    source: str


@dataclass(frozen=True)
class PriceTable:
    """``instance_hourly`` by ml.* type; ``fsx_gb_month`` by ``DEPLOYMENT`` or ``DEPLOYMENT/throughput``."""

    instance_hourly: Mapping[str, Price] = field(default_factory=dict)
    fsx_gb_month: Mapping[str, Price] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    def instance(self, instance_type: str) -> Price | None:
        return self.instance_hourly.get(instance_type)

    def fsx(self, deployment_type: str, throughput: int | None) -> Price | None:
        """The per-GB-month price; a throughput tier not listed falls back to the type's own entry."""
        if throughput is not None:
            tiered = self.fsx_gb_month.get(fsx_key(deployment_type, throughput))
            if tiered is not None:
                return tiered
        return self.fsx_gb_month.get(deployment_type)


def fsx_key(deployment_type: str, throughput: int | None) -> str:
    return deployment_type if throughput is None else f"{deployment_type}/{throughput}"


def layer(*tables: PriceTable) -> PriceTable:
    """Tables merged left to right: an entry in a later table replaces the same entry before it."""
    hourly: dict[str, Price] = {}
    storage: dict[str, Price] = {}
    sources: list[str] = []
    for table in tables:
        hourly.update(table.instance_hourly)
        storage.update(table.fsx_gb_month)
        sources.extend(s for s in table.sources if s not in sources)
    return PriceTable(hourly, storage, tuple(sources))


def parse_table(doc: Any, origin: str) -> PriceTable:
    """A table from its file form (see data/prices.json); ``origin`` names the file in errors."""
    if not isinstance(doc, Mapping):
        raise UsageError(f"{origin}: a price file must be a mapping with instance_hourly and/or fsx_gb_month")
    unknown = (
        set(doc)
        - {"source", "as_of", "region", "currency", "approximate", "note"}
        - {
            "instance_hourly",
            "fsx_gb_month",
        }
    )
    if unknown:
        raise UsageError(f"{origin}: unknown key {sorted(unknown)[0]!r} (expected instance_hourly, fsx_gb_month)")
    currency = doc.get("currency", "USD")
    if currency != "USD":
        raise UsageError(f"{origin}: currency {currency!r} is not supported (prices are USD)")
    label = _label(doc, origin)
    hourly = _prices(doc, "instance_hourly", origin, _INSTANCE, "ml.p5.48xlarge")
    storage = _prices(doc, "fsx_gb_month", origin, _FSX_KEY, "PERSISTENT_2/250")
    return PriceTable(
        {k: Price(v, label) for k, v in hourly.items()},
        {k: Price(v, label) for k, v in storage.items()},
        (label,),
    )


def _label(doc: Mapping[str, Any], origin: str) -> str:
    parts = [str(doc.get("source") or origin)]
    if doc.get("as_of"):
        parts.append(f"as of {doc['as_of']}")
    if doc.get("region"):
        parts.append(str(doc["region"]))
    if doc.get("approximate"):
        parts.append("approximate")
    return ", ".join(parts)


def _prices(
    doc: Mapping[str, Any], section: str, origin: str, pattern: re.Pattern[str], example: str
) -> dict[str, float]:
    raw = doc.get(section) or {}
    if not isinstance(raw, Mapping):
        raise UsageError(f"{origin}: {section} must be a mapping of name to price")
    out: dict[str, float] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not pattern.match(key):
            raise UsageError(f"{origin}: {section}.{key}: not a price key (e.g. {example})")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise UsageError(f"{origin}: {section}.{key}: {value!r} is not a price (a number, 0 or more)")
        out[key] = float(value)
    return out


def bundled() -> PriceTable:
    """The table shipped with the package (us-east-1, approximate; its date is in the file)."""
    text = resources.files("hyperpod_scheduler.cost").joinpath("data/prices.json").read_text("utf-8")
    return parse_table(json.loads(text), "bundled prices")


def load_file(path: str | Path) -> PriceTable:
    """A user's override file, JSON or YAML, in the bundled file's shape (any subset of entries)."""
    p = Path(path).expanduser()
    try:
        text = p.read_text("utf-8")
    except OSError as exc:
        raise UsageError(f"price file {str(p)!r}: {exc.strerror or exc}") from None
    try:
        doc = yaml.safe_load(text)  # YAML is a superset of JSON: one parser for both
    except yaml.YAMLError as exc:
        raise UsageError(f"price file {str(p)!r}: not YAML or JSON ({str(exc).splitlines()[0]})") from None
    return parse_table(doc if doc is not None else {}, f"override {p.name}")
