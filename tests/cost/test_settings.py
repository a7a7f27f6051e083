"""The ``cost:`` config section and how the report command reads it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from hyperpod_scheduler.cli.report import settings_from
from hyperpod_scheduler.cost.settings import CostSettings
from hyperpod_scheduler.errors import UsageError


def _ctx(cost: Any) -> Any:
    return SimpleNamespace(config=SimpleNamespace(cost=cost, targets=[]))


def test_defaults_use_the_bundled_table_and_discover_fsx() -> None:
    s = settings_from(SimpleNamespace(config=SimpleNamespace(targets=[])))  # type: ignore[arg-type]
    assert s.prices.source == "bundled" and s.prices.override is None and s.fsx.discover


def test_a_config_section_is_read_whether_typed_or_raw() -> None:
    raw = {"prices": {"source": "api", "cache_ttl_hours": 12}, "fsx": {"file_systems": {"train": ["fs-0123abcd"]}}}
    for cost in (raw, CostSettings.model_validate(raw)):
        s = settings_from(_ctx(cost))
        assert s.prices.source == "api" and s.fsx.file_systems == {"train": ["fs-0123abcd"]}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"prices": {"source": "web"}}, "cost.prices.source"),
        ({"prices": {"cache_ttl_hours": 0}}, "cost.prices.cache_ttl_hours"),
        ({"fsx": {"file_systems": {"train": ["fsx-1"]}}}, "'fsx-1' is not an FSx id"),
        ({"price": {}}, "cost.price"),
    ],
)
def test_bad_cost_section_names_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace(".", r"\.")):
        settings_from(_ctx(raw))


def test_typed_model_refuses_unknown_keys() -> None:
    with pytest.raises(ValidationError):
        CostSettings.model_validate({"prices": {"sauce": "api"}})
