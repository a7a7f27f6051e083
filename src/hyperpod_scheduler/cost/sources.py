"""Which prices a report uses: bundled table, then the Price List API (when enabled), then the override.

The only module here that decides about I/O for prices; the clock and the client factory are
passed in so tests run it against a Stubber and a fixed instant.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.cost import pricelist
from hyperpod_scheduler.cost.prices import PriceTable, bundled, layer, load_file
from hyperpod_scheduler.cost.settings import PriceSettings
from hyperpod_scheduler.errors import UsageError


def default_cache(region: str) -> Path:
    return Path.home() / ".cache" / "hyperpod-scheduler" / f"prices-{region}.json"


def default_override() -> Path:
    """Where ``prices update`` writes when the config names no override file, and where the report
    looks for one then: ``$XDG_CONFIG_HOME/hyperpod-scheduler/prices.yaml`` (``~/.config`` by default)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "hyperpod-scheduler" / "prices.yaml"


def override_path(settings: PriceSettings) -> Path:
    """The override file this configuration uses (it may not exist yet)."""
    return Path(settings.override).expanduser() if settings.override else default_override()


def resolve(
    settings: PriceSettings,
    now: datetime,
    pricing_client: Callable[[], Any],
    notes: list[str] | None = None,
) -> PriceTable:
    """The layered table. ``notes`` collects one line per fallback taken (shown under the report)."""
    said = notes if notes is not None else []
    layers = [bundled()]
    if settings.source == "api":
        api = _from_api(settings, now, pricing_client, said)
        if api is not None:
            layers.append(api)
    override = override_path(settings)
    if settings.override or override.is_file():  # a configured file must exist; the default one may not
        layers.append(load_file(override))
    return layer(*layers)


def _from_api(
    settings: PriceSettings, now: datetime, pricing_client: Callable[[], Any], notes: list[str]
) -> PriceTable | None:
    path = Path(settings.cache).expanduser() if settings.cache else default_cache(settings.region)
    ttl = pricelist.check_ttl(settings.cache_ttl_hours)
    cached = pricelist.read_cache(path, settings.region, now, ttl)
    if cached is not None:
        return cached
    try:
        table = pricelist.fetch(pricing_client(), settings.region, now, notes)
    except (BotoCoreError, ClientError) as exc:
        notes.append(f"AWS Price List API unreachable ({exc}); using the bundled prices")
        return None
    if not table.instance_hourly and not table.fsx_gb_month:
        notes.append(f"AWS Price List API returned no usable prices for {settings.region}; using the bundled prices")
        return None
    try:
        pricelist.write_cache(path, settings.region, table, now)
    except UsageError as exc:  # a folder, a device or a link where the cache goes: a missed shortcut only
        notes.append(f"price cache not written: {exc}")
    return table
