"""The AWS Price List API (``pricing:GetProducts``) as a price table, and its on-disk cache.

Only called when the config asks for it (``cost: {prices: {source: api}}``): the default report
never leaves the machine for prices. The Price List endpoint lives in us-east-1 whatever region the
clusters are in; ``regionCode`` selects the prices of the clusters' region.

Rows are read leniently: a row whose attributes or unit do not match what we price (HyperPod
instance hours, FSx for Lustre storage GB-months, USD, on demand) is skipped, so an attribute
AWS renames leaves that price to the bundled table instead of failing the report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hyperpod_scheduler.aws.pages import Pages
from hyperpod_scheduler.cost.prices import MAX_USD, Price, PriceTable, fsx_key, is_amount
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import bounded, files

PRICING_REGION = "us-east-1"
SAGEMAKER = "AmazonSageMaker"
FSX = "AmazonFSx"
# HyperPod node hours carry this in their usage type (e.g. "USE1-Cluster:ml.p5.48xlarge"); training,
# hosting and notebook rows for the same instance type are priced differently and must not match.
HYPERPOD_USAGE = "Cluster"
_DEPLOYMENT = {
    "scratch1": "SCRATCH_1",
    "scratch2": "SCRATCH_2",
    "persistent1": "PERSISTENT_1",
    "persistent2": "PERSISTENT_2",
}
CACHE_FORMAT = 2
API_SOURCE = "AWS Price List API"


_SHOWN = 40  # characters of a refused price quoted back


class Refused(list[str]):
    """Price List rows left out because their price is not an amount ("Infinity", "NaN", "1e308", -5):
    ``what 'value'`` each, said in one line by :meth:`note`."""

    def note(self, service: str) -> str | None:
        if not self:
            return None
        shown = ", ".join(self[:5]) + (f" and {len(self) - 5} more" if len(self) > 5 else "")
        return (
            f"AWS Price List API ({service}): {len(self)} row(s) left out, their price is not an amount "
            f"from 0 to {MAX_USD:,.0f} USD: {shown}"
        )


def _hourly_usd(product: Mapping[str, Any], unit: str, what: str, refused: Refused | None) -> float | None:
    """The single on-demand USD price per ``unit`` of one product, or None (a price that is not an
    amount is added to ``refused``, never used: 1e308 becomes $inf once multiplied by hours)."""
    on_demand = (product.get("terms") or {}).get("OnDemand") or {}
    for term in on_demand.values():
        for dim in (term.get("priceDimensions") or {}).values():
            if str(dim.get("unit", "")).lower() != unit.lower():
                continue
            usd = (dim.get("pricePerUnit") or {}).get("USD")
            try:
                value = float(str(usd))
            except (TypeError, ValueError):
                continue
            if not is_amount(value):
                if refused is not None:
                    refused.append(f"{what} {str(usd)[:_SHOWN]!r}")
                return None
            if value > 0:  # tiered rows start with a 0-priced free tier we do not want
                return value
    return None


def instance_prices(price_list: Iterable[str], refused: Refused | None = None) -> dict[str, float]:
    """HyperPod ml.* prices per hour from GetProducts ``PriceList`` strings of ``AmazonSageMaker``."""
    out: dict[str, float] = {}
    for text in price_list:
        product = bounded.load_json(text, "Price List product")
        if not isinstance(product, dict):
            continue  # a row we cannot read prices nothing
        attrs = (product.get("product") or {}).get("attributes") or {}
        itype = attrs.get("instanceName") or attrs.get("instanceType") or ""
        if not str(itype).startswith("ml.") or HYPERPOD_USAGE not in str(attrs.get("usagetype", "")):
            continue
        usd = _hourly_usd(product, "Hrs", str(itype), refused)
        if usd is not None:
            out[str(itype)] = usd
    return out


def fsx_prices(price_list: Iterable[str], refused: Refused | None = None) -> dict[str, float]:
    """FSx for Lustre storage prices per GB-month (key ``DEPLOYMENT[/throughput]``) from ``AmazonFSx`` rows."""
    out: dict[str, float] = {}
    for text in price_list:
        product = bounded.load_json(text, "Price List product")
        if not isinstance(product, dict):
            continue  # a row we cannot read prices nothing
        attrs = (product.get("product") or {}).get("attributes") or {}
        if "lustre" not in str(attrs.get("fileSystemType", "")).lower():
            continue
        if "storage" not in str((product.get("product") or {}).get("productFamily", "")).lower():
            continue
        deployment = _DEPLOYMENT.get(re.sub(r"[^a-z0-9]", "", str(attrs.get("deploymentOption", "")).lower()))
        if deployment is None:
            continue
        digits = re.match(r"\d+", str(attrs.get("throughputCapacity", "")))
        throughput = int(digits.group()) if digits and not deployment.startswith("SCRATCH") else None
        key = fsx_key(deployment, throughput)
        usd = _hourly_usd(product, "GB-Mo", key, refused)
        if usd is not None:
            out[key] = usd
    return out


def _all_products(client: Any, service: str, region: str) -> Pages:
    """Every product of ``service`` in ``region``, one page in memory at a time (the rows are parsed as
    they come and only the prices kept), within the GetProducts bounds."""
    return Pages(
        lambda **kw: client.get_products(**kw),
        "GetProducts",
        "PriceList",
        ServiceCode=service,
        FormatVersion="aws_v1",
        Filters=[{"Type": "TERM_MATCH", "Field": "regionCode", "Value": region}],
    )


def fetch(client: Any, region: str, fetched_at: datetime, notes: list[str] | None = None) -> PriceTable:
    """Ask the Price List API (``client`` is a ``pricing`` client in us-east-1) for ``region``'s prices.

    ``notes`` collects one line per thing left out (rows whose price is not an amount)."""
    source, as_of = f"{API_SOURCE}, {region}", f"{fetched_at:%Y-%m-%d}"
    said = notes if notes is not None else []
    refused, products = Refused(), _all_products(client, SAGEMAKER, region)
    hourly = instance_prices(products, refused)
    said.extend(n for n in (refused.note(SAGEMAKER), _cut(products, SAGEMAKER)) if n)
    refused, products = Refused(), _all_products(client, FSX, region)
    storage = fsx_prices(products, refused)
    said.extend(n for n in (refused.note(FSX), _cut(products, FSX)) if n)
    return PriceTable(
        {k: Price(v, source, as_of) for k, v in hourly.items()},
        {k: Price(v, source, as_of) for k, v in storage.items()},
        (f"{source}, fetched {as_of}",),
    )


def _cut(products: Pages, service: str) -> str | None:
    if products.cut is None:
        return None
    return f"AWS Price List API ({service}): {products.cut}; prices not read come from the other tables"


# ---- cache ---------------------------------------------------------------------------------------
def write_cache(path: Path, region: str, table: PriceTable, fetched_at: datetime) -> None:
    doc = {
        "format": CACHE_FORMAT,
        "region": region,
        "fetched_at": fetched_at.isoformat(),
        "source": f"{API_SOURCE}, {region}",
        "instance_hourly": {k: p.usd for k, p in table.instance_hourly.items()},
        "fsx_gb_month": {k: p.usd for k, p in table.fsx_gb_month.items()},
    }
    # Atomic (a reader never sees half a cache), and never over a device, a FIFO or a link: UsageError.
    files.write_text(path, json.dumps(doc, indent=1, sort_keys=True, allow_nan=False), "price cache", make_folders=True)


def read_cache(path: Path, region: str, now: datetime, ttl: timedelta) -> PriceTable | None:
    """The cached table if it is for ``region`` and younger than ``ttl``; None if absent, stale or unreadable."""
    try:
        doc = bounded.read_json(path)  # a cache file is read like any file: bounded
        fetched = datetime.fromisoformat(doc["fetched_at"])
        if doc.get("format") != CACHE_FORMAT or doc.get("region") != region or not now - ttl <= fetched <= now:
            return None
        source, as_of = str(doc.get("source") or API_SOURCE) + " (cached)", f"{fetched:%Y-%m-%d}"
        return PriceTable(
            {str(k): Price(_cached_usd(v), source, as_of) for k, v in doc["instance_hourly"].items()},
            {str(k): Price(_cached_usd(v), source, as_of) for k, v in doc["fsx_gb_month"].items()},
            (f"{source}, fetched {as_of}",),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UsageError):
        return None  # a damaged cache is only a missed shortcut: fetch again


def _cached_usd(value: Any) -> float:
    if not is_amount(value):
        raise ValueError(f"{value!r} is not a price")  # the whole cache is then not believed
    return float(value)


def check_ttl(hours: float) -> timedelta:
    if hours <= 0:
        raise UsageError(f"cost.prices.cache_ttl_hours: {hours} must be more than 0")
    return timedelta(hours=hours)
