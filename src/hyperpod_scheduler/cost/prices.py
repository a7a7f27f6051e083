"""Price tables: instance prices per hour and FSx prices per GB-month, each price with its source and date.

A table is plain data. Tables are layered with ``layer`` (later wins), so the order "bundled, then
the Price List answer, then the user's override file" is one expression and every price keeps where
it came from, which the report prints beside the figures it priced.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from hyperpod_scheduler.cost.rates import HOURS_PER_MONTH as HOURS_PER_MONTH  # one month everywhere
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import bounded

# No HyperPod node-hour nor FSx GB-month costs anywhere near this; a figure above it (1e308, which turns
# into $inf once multiplied by hours) is a broken or hostile answer, not a price.
MAX_USD = 100_000.0
DEPLOYMENT_TYPES = ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
OPENZFS_DEPLOYMENTS = ("SINGLE_AZ_1", "SINGLE_AZ_2", "SINGLE_AZ_HA_1", "SINGLE_AZ_HA_2", "MULTI_AZ_1")
_LUSTRE_KEY = r"(SCRATCH_1|SCRATCH_2|PERSISTENT_1|PERSISTENT_2)(/[1-9][0-9]*)?"
_OPENZFS_KEY = r"OPENZFS(/(" + "|".join(OPENZFS_DEPLOYMENTS) + "))?"
_FSX_KEY = re.compile(rf"^({_LUSTRE_KEY}|{_OPENZFS_KEY})$")
_OPENZFS_ONLY = re.compile(rf"^{_OPENZFS_KEY}$")
_INSTANCE = re.compile(r"^ml\.[a-z0-9-]+\.[a-z0-9]+$")
_FILE_KEYS = ("source", "as_of", "region", "currency", "estimate", "approximate", "note")
_SECTIONS = ("instance_hourly", "fsx_gb_month", "fsx_mbps_month")
_ROW_KEYS = ("usd", "source", "as_of", "estimate", "note")


class Price(NamedTuple):
    """One price and where it came from: ``source`` and ``as_of`` name the page or file and its date,
    ``estimate`` marks figures nobody checked against AWS's own answer, ``note`` is what a reader must
    know about this row (e.g. a price cut that may not have reached it)."""

    usd: float
    source: str
    as_of: str | None = None
    estimate: bool = False
    note: str | None = None

    def describe(self) -> str:
        """``estimate: <source>, as of <date>`` and the row's note, for the report's price list."""
        text = ("estimate: " if self.estimate else "") + self.source
        if self.as_of:
            text += f", as of {self.as_of}"
        return f"{text}; {self.note}" if self.note else text


@dataclass(frozen=True)
class PriceTable:
    """``instance_hourly`` by ml.* type (USD per node-hour); ``fsx_gb_month`` by ``DEPLOYMENT`` or
    ``DEPLOYMENT/throughput`` for Lustre and ``OPENZFS[/DEPLOYMENT]`` for OpenZFS storage (USD per
    GB-month); ``fsx_mbps_month`` by ``OPENZFS[/DEPLOYMENT]`` for OpenZFS throughput capacity (USD per
    MB/s-month)."""

    instance_hourly: Mapping[str, Price] = field(default_factory=dict)
    fsx_gb_month: Mapping[str, Price] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    fsx_mbps_month: Mapping[str, Price] = field(default_factory=dict)

    def instance(self, instance_type: str) -> Price | None:
        return self.instance_hourly.get(instance_type)

    def fsx(self, deployment_type: str, throughput: int | None) -> Price | None:
        """The Lustre per-GB-month price; a throughput tier not listed falls back to the type's own entry."""
        entry = self.fsx_entry(deployment_type, throughput)
        return None if entry is None else entry[1]

    def fsx_entry(self, deployment_type: str, throughput: int | None) -> tuple[str, Price] | None:
        """The Lustre price with the key it was found under (``PERSISTENT_2/250`` or ``PERSISTENT_2``)."""
        keys = ([fsx_key(deployment_type, throughput)] if throughput is not None else []) + [deployment_type]
        return next(((k, self.fsx_gb_month[k]) for k in keys if k in self.fsx_gb_month), None)

    def openzfs(self, deployment_type: str | None) -> tuple[tuple[str, Price], tuple[str, Price]] | None:
        """OpenZFS (storage per GB-month, throughput per MB/s-month), each with its key; the deployment's
        own rows first, then the plain ``OPENZFS`` rows. None unless both are known."""
        keys = ([f"OPENZFS/{deployment_type}"] if deployment_type else []) + ["OPENZFS"]
        storage = next(((k, self.fsx_gb_month[k]) for k in keys if k in self.fsx_gb_month), None)
        throughput = next(((k, self.fsx_mbps_month[k]) for k in keys if k in self.fsx_mbps_month), None)
        return (storage, throughput) if storage is not None and throughput is not None else None


def fsx_key(deployment_type: str, throughput: int | None) -> str:
    return deployment_type if throughput is None else f"{deployment_type}/{throughput}"


def layer(*tables: PriceTable) -> PriceTable:
    """Tables merged left to right: an entry in a later table replaces the same entry before it."""
    hourly: dict[str, Price] = {}
    storage: dict[str, Price] = {}
    throughput: dict[str, Price] = {}
    sources: list[str] = []
    for table in tables:
        hourly.update(table.instance_hourly)
        storage.update(table.fsx_gb_month)
        throughput.update(table.fsx_mbps_month)
        sources.extend(s for s in table.sources if s not in sources)
    return PriceTable(hourly, storage, tuple(sources), throughput)


def parse_table(doc: Any, origin: str) -> PriceTable:
    """A table from its file form (see data/prices.json); ``origin`` names the file in errors.

    A row is a number (it takes the file's ``source``, ``as_of``, ``estimate``) or a mapping
    ``{usd, source, as_of, estimate, note}`` whose own fields win over the file's."""
    if not isinstance(doc, Mapping):
        raise UsageError(f"{origin}: a price file must be a mapping with instance_hourly and/or fsx_gb_month")
    unknown = set(doc) - set(_FILE_KEYS) - set(_SECTIONS)
    if unknown:
        raise UsageError(f"{origin}: unknown key {sorted(map(str, unknown))[0]!r} (expected {', '.join(_SECTIONS)})")
    currency = doc.get("currency", "USD")
    if currency != "USD":
        raise UsageError(f"{origin}: currency {currency!r} is not supported (prices are USD)")
    defaults = Price(
        0.0,
        _text(doc, "source", origin) or origin,
        _text(doc, "as_of", origin),
        _flag(doc, "estimate", origin) or _flag(doc, "approximate", origin),
    )
    return PriceTable(
        _prices(doc, "instance_hourly", origin, _INSTANCE, "ml.p5.48xlarge", defaults),
        _prices(doc, "fsx_gb_month", origin, _FSX_KEY, "PERSISTENT_2/250", defaults),
        (_label(doc, defaults),),
        _prices(doc, "fsx_mbps_month", origin, _OPENZFS_ONLY, "OPENZFS/SINGLE_AZ_2", defaults),
    )


def _label(doc: Mapping[str, Any], defaults: Price) -> str:
    parts = [("estimate: " if defaults.estimate else "") + defaults.source]
    if defaults.as_of:
        parts.append(f"as of {defaults.as_of}")
    if doc.get("region"):
        parts.append(str(doc["region"]))
    return ", ".join(parts)


def _text(doc: Mapping[str, Any], key: str, where: str) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float | date):
        raise UsageError(f"{where}: {key}: {value!r} is not text")
    return value.isoformat() if isinstance(value, date) else str(value)


def _flag(doc: Mapping[str, Any], key: str, where: str) -> bool:
    value = doc.get(key, False)
    if not isinstance(value, bool):
        raise UsageError(f"{where}: {key}: {value!r} is not true or false")
    return value


def is_amount(value: Any) -> bool:
    """Whether ``value`` is a number a price can be: finite, from 0 to ``MAX_USD`` (no NaN, no Infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value) and 0 <= value <= MAX_USD
    except OverflowError:  # an int past a float's range
        return False


def _usd(value: Any, where: str) -> float:
    if not is_amount(value):
        raise UsageError(f"{where}: {value!r} is not a price (a number from 0 to {MAX_USD:,.0f} USD)")
    return float(value)


def _prices(
    doc: Mapping[str, Any], section: str, origin: str, pattern: re.Pattern[str], example: str, defaults: Price
) -> dict[str, Price]:
    raw = doc.get(section) or {}
    if not isinstance(raw, Mapping):
        raise UsageError(f"{origin}: {section} must be a mapping of name to price")
    out: dict[str, Price] = {}
    for key, value in raw.items():
        where = f"{origin}: {section}.{key}"
        if not isinstance(key, str) or not pattern.match(key):
            raise UsageError(f"{where}: not a price key (e.g. {example})")
        if not isinstance(value, Mapping):
            out[key] = defaults._replace(usd=_usd(value, where))
            continue
        extra = sorted(set(map(str, value)) - set(_ROW_KEYS))
        if extra:
            raise UsageError(f"{where}: unknown field {extra[0]!r} (expected {', '.join(_ROW_KEYS)})")
        if "usd" not in value:
            raise UsageError(f"{where}: a price row needs usd")
        out[key] = Price(
            _usd(value["usd"], f"{where}.usd"),
            _text(value, "source", where) or defaults.source,
            _text(value, "as_of", where) or defaults.as_of,
            _flag(value, "estimate", where) if "estimate" in value else defaults.estimate,
            _text(value, "note", where),
        )
    return out


def bundled() -> PriceTable:
    """The table shipped with the package: us-east-1 estimates, every row with its source and date."""
    text = resources.files("hyperpod_scheduler.cost").joinpath("data/prices.json").read_text("utf-8")
    return parse_table(json.loads(text), "bundled prices")


def load_file(path: str | Path, shown: str | Path | None = None) -> PriceTable:
    """A user's override file, JSON or YAML, in the bundled file's shape (any subset of entries).

    ``shown`` is the file errors and sources name when ``path`` is a stand-in for it (``prices update``
    checks its new text in a temporary file beside the user's before replacing it)."""
    p = Path(path).expanduser()
    named = Path(shown).expanduser() if shown is not None else p
    try:
        doc = bounded.read_yaml(p)  # YAML is a superset of JSON: one parser for both
    except bounded.Unreadable as exc:
        raise UsageError(f"price file {str(named)!r}: {exc.problem}") from None
    except bounded.BadDocument as exc:
        raise UsageError(f"price file {str(named)!r}: not YAML or JSON ({exc.where}{exc.problem})") from None
    return parse_table(doc if doc is not None else {}, f"override {named.name}")
