"""``prices update``: recorded Price List answers (botocore Stubber) written into the override file, which
``report`` then reads; the user's own rows survive; a bad file or an empty answer changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import typer
from botocore.stub import Stubber
from typer.testing import CliRunner

from hyperpod_scheduler.cli import report as report_cli
from hyperpod_scheduler.cost import sources
from hyperpod_scheduler.cost.prices import load_file
from hyperpod_scheduler.cost.settings import PriceSettings
from hyperpod_scheduler.errors import UsageError
from tests.cost.test_pricelist import NOW, _expect_products

runner = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer()
    report_cli.register(app)

    @app.callback()
    def _root() -> None:
        pass

    return app


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Stubber]:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t")

    class Clients:
        def client(self, service: str, profile: str | None = None, region: str | None = None) -> Any:
            assert service == "pricing" and region == "us-east-1"  # the Price List endpoint's region
            return client

    monkeypatch.setattr(report_cli, "AwsClients", Clients)
    with Stubber(client) as s:
        yield s


def test_update_writes_the_default_override_file_that_report_then_reads(stub: Stubber, tmp_path: Path) -> None:
    _expect_products(stub)
    result = runner.invoke(_app(), ["prices", "update"])
    assert result.exit_code == 0, result.output
    stub.assert_no_pending_responses()
    target = sources.default_override()
    assert target == tmp_path / "config" / "hyperpod-scheduler" / "prices.yaml" and target.is_file()
    assert "wrote 2 instance_hourly, 3 fsx_gb_month rows" in result.output
    table = load_file(target)
    p5 = table.instance("ml.p5.48xlarge")
    assert p5 is not None and p5.usd == 96.5 and p5.source == "AWS Price List API, us-east-1" and not p5.estimate
    assert p5.as_of is not None
    # With no override configured, the report picks the default file up and names it per price.
    layered = sources.resolve(PriceSettings(), NOW, lambda: None)
    assert layered.instance("ml.p5.48xlarge").source == "AWS Price List API, us-east-1"  # type: ignore[union-attr]
    assert layered.instance("ml.trn1.32xlarge").estimate  # type: ignore[union-attr]  # not in the answer: bundled


def test_rows_of_your_own_are_kept_and_earlier_api_rows_replaced(stub: Stubber, tmp_path: Path) -> None:
    ours = tmp_path / "ours.yaml"
    ours.write_text(
        "# negotiated with our account team\n"
        "source: EDP 2026\n"
        "instance_hourly:\n"
        "  ml.p5.48xlarge: 61.2  # until March\n"
        "  ml.g5.8xlarge: {usd: 9.99, source: AWS Price List API, us-east-1, as_of: 2026-01-01}\n"
    )
    _expect_products(stub)
    result = runner.invoke(_app(), ["prices", "update", "--file", str(ours)])
    assert result.exit_code == 0, result.output
    assert "kept 1 row(s) of your own" in result.output and "instance_hourly ml.p5.48xlarge" in result.output
    text = ours.read_text()
    assert "# negotiated with our account team" in text and "# until March" in text  # comments survive
    table = load_file(ours)
    assert table.instance("ml.p5.48xlarge").usd == 61.2  # type: ignore[union-attr]
    assert table.instance("ml.g5.8xlarge").usd == 2.99  # type: ignore[union-attr]  # an old fetch: replaced
    assert "--prices" in result.output  # this file is not one the report reads by itself


def test_overwrite_replaces_your_rows_too(stub: Stubber, tmp_path: Path) -> None:
    ours = tmp_path / "ours.json"
    ours.write_text(json.dumps({"instance_hourly": {"ml.p5.48xlarge": 61.2}}))
    _expect_products(stub)
    result = runner.invoke(_app(), ["prices", "update", "--file", str(ours), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert load_file(ours).instance("ml.p5.48xlarge").usd == 96.5  # type: ignore[union-attr]


def test_an_empty_answer_or_a_broken_file_leaves_the_file_as_it_was(stub: Stubber, tmp_path: Path) -> None:
    ours = tmp_path / "ours.yaml"
    ours.write_text("instance_hourly: [oops\n")
    _expect_products(stub)
    result = runner.invoke(_app(), ["prices", "update", "--file", str(ours)])
    assert isinstance(result.exception, UsageError) and "left as it was" in str(result.exception)
    assert ours.read_text() == "instance_hourly: [oops\n"
    for service in ("AmazonSageMaker", "AmazonFSx"):
        stub.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": []},
            {
                "ServiceCode": service,
                "FormatVersion": "aws_v1",
                "Filters": [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-east-1"}],
            },
        )
    good = tmp_path / "good.yaml"
    good.write_text("instance_hourly: {ml.g5.xlarge: 1.0}\n")
    result = runner.invoke(_app(), ["prices", "update", "--file", str(good)])
    assert isinstance(result.exception, UsageError) and "no usable prices" in str(result.exception)
    assert good.read_text() == "instance_hourly: {ml.g5.xlarge: 1.0}\n"
