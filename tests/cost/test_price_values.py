"""Prices that are not amounts ("Infinity", "NaN", "1e308", negative) are refused wherever prices enter:
the Price List answer (``prices update`` and the report's own fetch), the cache, the override file. The
report never shows ``$inf`` and its JSON is always JSON (issue 28, item 16)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from typer.testing import CliRunner

from hyperpod_scheduler.cli import output
from hyperpod_scheduler.cli import report as report_cli
from hyperpod_scheduler.cost import pricelist, sources
from hyperpod_scheduler.cost.prices import MAX_USD, load_file
from hyperpod_scheduler.cost.settings import PriceSettings
from hyperpod_scheduler.errors import UsageError
from tests.cost.test_pricelist import NOW, _expect_products, _pages
from tests.cost.test_prices_update import _app
from tests.cost.test_report_cli import WINDOW, env  # noqa: F401  (the report's store with history)
from tests.cost.test_report_cli import _run as _report

runner = CliRunner()
HOSTILE = ("Infinity", "NaN", "1e308", "-5", "inf")
FILTERS = [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-east-1"}]


def _sagemaker_with_p5_at(usd: str) -> list[dict[str, Any]]:
    """The recorded SageMaker pages, with the HyperPod p5 row's price replaced by ``usd``."""
    pages = copy.deepcopy(_pages("get_products_sagemaker.json"))
    pages[0]["PriceList"][0] = pages[0]["PriceList"][0].replace('"USD":"96.5000000000"', f'"USD":"{usd}"')
    assert f'"USD":"{usd}"' in pages[0]["PriceList"][0]
    return pages


def _queue(stub: Stubber, sagemaker: list[dict[str, Any]]) -> None:
    pages = [(pricelist.SAGEMAKER, p) for p in sagemaker] + [
        (pricelist.FSX, p) for p in _pages("get_products_fsx.json")
    ]
    seen: dict[str, int] = {}
    for service, page in pages:
        params: dict[str, Any] = {"ServiceCode": service, "FormatVersion": "aws_v1", "Filters": FILTERS}
        if seen.get(service):
            params["NextToken"] = ANY
        seen[service] = seen.get(service, 0) + 1
        stub.add_response("get_products", page, params)


@pytest.fixture
def pricing() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t")
    with Stubber(client) as stub:
        yield client, stub


@pytest.mark.parametrize("usd", HOSTILE)
def test_a_price_list_row_that_is_not_an_amount_is_left_out_and_said(pricing: tuple[Any, Stubber], usd: str) -> None:
    client, stub = pricing
    _queue(stub, _sagemaker_with_p5_at(usd))
    notes: list[str] = []
    table = pricelist.fetch(client, "us-east-1", NOW, notes)
    assert "ml.p5.48xlarge" not in table.instance_hourly
    assert table.instance_hourly["ml.g5.8xlarge"].usd == 2.99  # the other rows still count
    (note,) = notes
    assert "ml.p5.48xlarge" in note and usd in note and "\n" not in note


@pytest.mark.parametrize("usd", HOSTILE)
def test_the_report_prices_a_refused_row_from_the_bundled_table(
    pricing: tuple[Any, Stubber], tmp_path: Path, usd: str
) -> None:
    client, stub = pricing
    _queue(stub, _sagemaker_with_p5_at(usd))
    notes: list[str] = []
    table = sources.resolve(PriceSettings(source="api", cache=str(tmp_path / "c.json")), NOW, lambda: client, notes)
    assert table.instance("ml.p5.48xlarge").usd == 98.32  # type: ignore[union-attr]  # bundled
    assert any("ml.p5.48xlarge" in n for n in notes)
    cached = json.loads((tmp_path / "c.json").read_text())
    assert "ml.p5.48xlarge" not in cached["instance_hourly"]


@pytest.mark.parametrize("usd", ["Infinity", "NaN", "1e308", -1])
def test_a_cache_holding_a_non_amount_is_fetched_again(pricing: tuple[Any, Stubber], tmp_path: Path, usd: Any) -> None:
    client, stub = pricing
    cache = tmp_path / "c.json"
    settings = PriceSettings(source="api", cache=str(cache))
    _expect_products(stub)
    sources.resolve(settings, NOW, lambda: client)
    doc = json.loads(cache.read_text())
    doc["instance_hourly"]["ml.p5.48xlarge"] = float(usd) if isinstance(usd, str) else usd
    cache.write_text(json.dumps(doc))  # Python's json writes Infinity and NaN bare
    _expect_products(stub)
    table = sources.resolve(settings, NOW + timedelta(hours=1), lambda: client)
    stub.assert_no_pending_responses()  # fetched again: the damaged cache was not believed
    assert table.instance("ml.p5.48xlarge").usd == 96.5  # type: ignore[union-attr]


def test_prices_update_leaves_a_non_amount_out_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, pricing: tuple[Any, Stubber]
) -> None:
    client, stub = pricing
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    class Clients:
        def client(self, service: str, profile: str | None = None, region: str | None = None) -> Any:
            return client

    monkeypatch.setattr(report_cli, "AwsClients", Clients)
    _queue(stub, _sagemaker_with_p5_at("Infinity"))
    target = tmp_path / "p.yaml"
    result = runner.invoke(_app(), ["prices", "update", "--file", str(target)])
    assert result.exit_code == 0, result.output
    assert "ml.p5.48xlarge" in result.output and "Infinity" in result.output
    table = load_file(target)
    assert table.instance("ml.p5.48xlarge") is None and table.instance("ml.g5.8xlarge").usd == 2.99  # type: ignore[union-attr]


@pytest.mark.parametrize("value", ["1e308", "1.0e+308", "100001", ".inf", ".nan", "-0.5"])
def test_an_override_row_that_is_not_an_amount_is_refused_naming_the_field(tmp_path: Path, value: str) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(f"instance_hourly: {{ml.p5.48xlarge: {value}}}\n")
    with pytest.raises(UsageError) as err:
        load_file(f)
    message = str(err.value)
    assert "p.yaml: instance_hourly.ml.p5.48xlarge" in message and "not a price" in message and "\n" not in message


def test_the_largest_price_is_still_a_price(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(f"instance_hourly: {{ml.p5.48xlarge: {MAX_USD}}}\n")
    assert load_file(f).instance("ml.p5.48xlarge").usd == MAX_USD  # type: ignore[union-attr]


def test_report_refuses_an_override_of_1e308_instead_of_showing_inf(env: Path, tmp_path: Path) -> None:  # noqa: F811
    prices = tmp_path / "p.json"
    prices.write_text('{"instance_hourly": {"ml.p5.48xlarge": 1.0e+308}}')  # YAML 1.1 reads bare 1e308 as text
    for fmt in ((), ("--json",)):
        result = _report(*WINDOW, "--state", str(env), "--no-fsx", "--prices", str(prices), *fmt)
        assert isinstance(result.exception, UsageError), result.output
        assert "p.json" in str(result.exception) and "ml.p5.48xlarge" in str(result.exception)
        assert "inf" not in result.output.lower() and "nan" not in result.output.lower()


def test_a_refusal_while_updating_names_the_users_file_not_a_temporary_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, pricing: tuple[Any, Stubber]
) -> None:
    client, stub = pricing
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    class Clients:
        def client(self, service: str, profile: str | None = None, region: str | None = None) -> Any:
            return client

    monkeypatch.setattr(report_cli, "AwsClients", Clients)
    ours = tmp_path / "ours.yaml"
    before = "instance_hourly:\n  ml.g5.xlarge: -1  # a typo of ours\n"
    ours.write_text(before)
    _expect_products(stub)
    result = runner.invoke(_app(), ["prices", "update", "--file", str(ours)])
    assert isinstance(result.exception, UsageError)
    message = str(result.exception)
    assert "ours.yaml: instance_hourly.ml.g5.xlarge: -1 is not a price" in message, message
    assert ".ours.yaml." not in message and "tmp" not in message
    assert ours.read_text() == before and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -float("inf")])
def test_json_output_never_writes_bare_infinity_or_nan(value: float) -> None:
    with pytest.raises(ValueError):
        output.print_json({"saving": value})
    with pytest.raises(ValueError):
        output.plain_data({"saving": value})
