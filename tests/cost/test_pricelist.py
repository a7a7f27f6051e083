"""The Price List API through recorded GetProducts answers (botocore Stubber), the cache and fallbacks."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from hyperpod_scheduler.cost import pricelist, sources
from hyperpod_scheduler.cost.settings import PriceSettings

RECORDED = Path(__file__).parent / "recorded"
NOW = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)


def _pages(name: str) -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = json.loads((RECORDED / name).read_text())
    return pages


def _client() -> Any:
    return boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def _expect_products(stub: Stubber) -> None:
    """Queue the recorded answers in the order ``fetch`` asks: SageMaker (2 pages), then FSx."""
    for service, name in (
        (pricelist.SAGEMAKER, "get_products_sagemaker.json"),
        (pricelist.FSX, "get_products_fsx.json"),
    ):
        for i, page in enumerate(_pages(name)):
            params: dict[str, Any] = {
                "ServiceCode": service,
                "FormatVersion": "aws_v1",
                "Filters": [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-east-1"}],
            }
            if i:
                params["NextToken"] = ANY
            stub.add_response("get_products", page, params)


@pytest.fixture
def stubbed() -> Iterator[tuple[Any, Stubber]]:
    client = _client()
    with Stubber(client) as stub:
        yield client, stub


def test_hyperpod_rows_are_priced_and_training_rows_of_the_same_type_are_not() -> None:
    texts = [t for page in _pages("get_products_sagemaker.json") for t in page["PriceList"]]
    prices = pricelist.instance_prices(texts)
    assert prices == {"ml.p5.48xlarge": 96.5, "ml.g5.8xlarge": 2.99}


def test_lustre_storage_rows_are_priced_by_deployment_and_throughput() -> None:
    texts = [t for page in _pages("get_products_fsx.json") for t in page["PriceList"]]
    assert pricelist.fsx_prices(texts) == {"PERSISTENT_2/250": 0.2, "PERSISTENT_2/125": 0.145, "SCRATCH_2": 0.14}


def test_api_prices_layer_over_bundled_and_are_cached(stubbed: tuple[Any, Stubber], tmp_path: Path) -> None:
    client, stub = stubbed
    _expect_products(stub)
    settings = PriceSettings(source="api", cache=str(tmp_path / "cache.json"))
    table = sources.resolve(settings, NOW, lambda: client)
    stub.assert_no_pending_responses()
    p5 = table.instance("ml.p5.48xlarge")
    assert p5 is not None and p5.usd == 96.5 and "Price List API" in p5.source
    assert table.instance("ml.trn1.32xlarge") is not None  # not in the answer: bundled still prices it
    assert table.fsx("PERSISTENT_2", 250).usd == 0.2  # type: ignore[union-attr]
    # Within the TTL the cache answers: a client call now would fail (no responses queued).
    again = sources.resolve(settings, NOW + timedelta(hours=100), lambda: client)
    assert again.instance("ml.p5.48xlarge").usd == 96.5  # type: ignore[union-attr]
    assert "(cached)" in again.instance("ml.p5.48xlarge").source  # type: ignore[union-attr]


def test_stale_cache_is_fetched_again(stubbed: tuple[Any, Stubber], tmp_path: Path) -> None:
    client, stub = stubbed
    cache = tmp_path / "cache.json"
    _expect_products(stub)
    settings = PriceSettings(source="api", cache=str(cache), cache_ttl_hours=24)
    sources.resolve(settings, NOW, lambda: client)
    _expect_products(stub)
    sources.resolve(settings, NOW + timedelta(hours=25), lambda: client)
    stub.assert_no_pending_responses()
    assert json.loads(cache.read_text())["fetched_at"] == (NOW + timedelta(hours=25)).isoformat()


def test_unreachable_api_falls_back_to_bundled_with_a_note(stubbed: tuple[Any, Stubber], tmp_path: Path) -> None:
    client, stub = stubbed
    stub.add_client_error("get_products", "AccessDeniedException", "not authorized to perform pricing:GetProducts")
    notes: list[str] = []
    table = sources.resolve(PriceSettings(source="api", cache=str(tmp_path / "c.json")), NOW, lambda: client, notes)
    assert table.instance("ml.p5.48xlarge").usd == 98.32  # type: ignore[union-attr]
    assert len(notes) == 1 and "Price List API unreachable" in notes[0] and "AccessDenied" in notes[0]
    assert not (tmp_path / "c.json").exists()


def test_damaged_cache_is_ignored(stubbed: tuple[Any, Stubber], tmp_path: Path) -> None:
    client, stub = stubbed
    cache = tmp_path / "c.json"
    cache.write_text("{not json")
    _expect_products(stub)
    table = sources.resolve(PriceSettings(source="api", cache=str(cache)), NOW, lambda: client)
    assert table.instance("ml.p5.48xlarge").usd == 96.5  # type: ignore[union-attr]


def test_override_beats_the_api(stubbed: tuple[Any, Stubber], tmp_path: Path) -> None:
    client, stub = stubbed
    _expect_products(stub)
    override = tmp_path / "o.yaml"
    override.write_text("instance_hourly: {ml.p5.48xlarge: 61.5}\n")
    settings = PriceSettings(source="api", cache=str(tmp_path / "c.json"), override=str(override))
    assert sources.resolve(settings, NOW, lambda: client).instance("ml.p5.48xlarge").usd == 61.5  # type: ignore[union-attr]


def test_default_settings_never_build_a_pricing_client() -> None:
    def forbidden() -> Any:
        raise AssertionError("the Price List API must not be called unless enabled")

    factory: Callable[[], Any] = forbidden
    table = sources.resolve(PriceSettings(), NOW, factory)
    assert table.instance("ml.p5.48xlarge").usd == 98.32  # type: ignore[union-attr]
