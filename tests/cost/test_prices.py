"""Price tables: the bundled table, override files and layering."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperpod_scheduler.cost.prices import Price, bundled, layer, load_file
from hyperpod_scheduler.errors import UsageError

COMMON = [
    "ml.p5.48xlarge",
    "ml.p5e.48xlarge",
    "ml.p5en.48xlarge",
    "ml.p4d.24xlarge",
    "ml.p4de.24xlarge",
    "ml.g5.xlarge",
    "ml.g5.48xlarge",
    "ml.trn1.32xlarge",
    "ml.trn2.48xlarge",
    "ml.c5.xlarge",
    "ml.m5.xlarge",
    "ml.t3.medium",
]


def test_bundled_table_prices_the_common_types_and_says_where_and_when_from() -> None:
    table = bundled()
    for itype in COMMON:
        price = table.instance(itype)
        assert price is not None and price.usd > 0, itype
    (source,) = table.sources
    assert "as of 2026-11-29" in source and source.startswith("estimate:") and "us-east-1" in source
    # Every row, not just the file, says where it came from, when, and that it is an estimate.
    for price in [*table.instance_hourly.values(), *table.fsx_gb_month.values()]:
        assert price.estimate and price.as_of == "2026-11-29" and "aws.amazon.com" in price.source
    # A P5 node costs far more than a controller: the ordering a reader relies on.
    assert table.instance("ml.p5.48xlarge").usd > 50 * table.instance("ml.m5.xlarge").usd  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("deployment", "throughput", "expected"),
    [
        ("PERSISTENT_2", 250, 0.21),
        ("PERSISTENT_2", 1000, 0.6),
        ("PERSISTENT_1", 200, 0.29),
        ("SCRATCH_2", None, 0.14),
    ],
)
def test_bundled_fsx_prices_by_deployment_and_throughput(
    deployment: str, throughput: int | None, expected: float
) -> None:
    price = bundled().fsx(deployment, throughput)
    assert price is not None and price.usd == pytest.approx(expected)


@pytest.mark.parametrize("itype", ["ml.p5.48xlarge", "ml.p5en.48xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge"])
def test_bundled_p4_and_p5_prices_say_the_june_2025_cut_is_unconfirmed_for_hyperpod(itype: str) -> None:
    price = bundled().instance(itype)
    assert price is not None and price.note is not None
    assert "June 2025" in price.note and "not confirmed" in price.note and "prices update" in price.note
    assert "June 2025" in price.describe() and price.describe().startswith("estimate: ")
    g5 = bundled().instance("ml.g5.xlarge")
    assert g5 is not None and g5.note is None


def test_a_row_may_carry_its_own_source_date_and_note(tmp_path: Path) -> None:
    f = tmp_path / "ours.yaml"
    f.write_text(
        "source: our EDP rates\nas_of: 2026-10-01\ninstance_hourly:\n"
        "  ml.p5.48xlarge: {usd: 61.2, source: 'quote Q-17', as_of: 2026-11-20, note: 'until March'}\n"
        "  ml.g5.xlarge: 1.0\n"
    )
    table = load_file(f)
    p5, g5 = table.instance("ml.p5.48xlarge"), table.instance("ml.g5.xlarge")
    assert p5 == Price(61.2, "quote Q-17", "2026-11-20", False, "until March")
    assert g5 == Price(1.0, "our EDP rates", "2026-10-01", False, None)  # the file's source and date


def test_openzfs_is_priced_by_storage_and_throughput_from_a_price_file(tmp_path: Path) -> None:
    assert bundled().openzfs("SINGLE_AZ_2") is None  # nothing bundled: no figure we could vouch for
    f = tmp_path / "z.yaml"
    f.write_text("fsx_gb_month: {OPENZFS: 0.09}\nfsx_mbps_month: {OPENZFS: 0.26, OPENZFS/MULTI_AZ_1: 0.52}\n")
    table = layer(bundled(), load_file(f))
    single, multi = table.openzfs("SINGLE_AZ_2"), table.openzfs("MULTI_AZ_1")
    assert single is not None and (single[0][1].usd, single[1][1].usd) == (0.09, 0.26)
    assert multi is not None and multi[1] == ("OPENZFS/MULTI_AZ_1", multi[1][1]) and multi[1][1].usd == 0.52


def test_unknown_throughput_tier_falls_back_to_the_deployment_entry_only_if_one_exists(tmp_path: Path) -> None:
    assert bundled().fsx("PERSISTENT_2", 777) is None
    f = tmp_path / "p.yaml"
    f.write_text("fsx_gb_month: {PERSISTENT_2: 0.3}\n")
    assert layer(bundled(), load_file(f)).fsx("PERSISTENT_2", 777).usd == 0.3  # type: ignore[union-attr]


def test_override_file_wins_and_keeps_its_source(tmp_path: Path) -> None:
    f = tmp_path / "ours.yaml"
    f.write_text("source: our EDP discount\ninstance_hourly:\n  ml.p5.48xlarge: 60.0\n")
    table = layer(bundled(), load_file(f))
    p5 = table.instance("ml.p5.48xlarge")
    assert p5 is not None and p5.usd == 60.0 and p5.source == "our EDP discount"
    g5 = table.instance("ml.g5.xlarge")
    assert g5 is not None and "bundled" in g5.source  # untouched entries keep the bundled price
    assert table.sources[-1] == "our EDP discount"


def test_override_file_in_json_works_too(tmp_path: Path) -> None:
    f = tmp_path / "ours.json"
    f.write_text('{"fsx_gb_month": {"SCRATCH_2": 0.1}}')
    assert load_file(f).fsx("SCRATCH_2", None).usd == 0.1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("instance_hourly: {ml.p5.48xlarge: -1}\n", "instance_hourly.ml.p5.48xlarge: -1 is not a price"),
        ("instance_hourly: {ml.p5.48xlarge: cheap}\n", "'cheap' is not a price"),
        ("instance_hourly: {p5.48xlarge: 3}\n", "instance_hourly.p5.48xlarge: not a price key"),
        ("fsx_gb_month: {LUSTRE_9: 3}\n", "fsx_gb_month.LUSTRE_9: not a price key"),
        ("instance_prices: {}\n", "unknown key 'instance_prices'"),
        ("currency: EUR\n", "currency 'EUR' is not supported"),
        ("- a\n- b\n", "must be a mapping"),
        ("instance_hourly: {ml.g5.xlarge: {price: 1}}\n", "ml.g5.xlarge: unknown field 'price'"),
        ("instance_hourly: {ml.g5.xlarge: {source: x}}\n", "ml.g5.xlarge: a price row needs usd"),
        ("instance_hourly: {ml.g5.xlarge: {usd: 1, estimate: maybe}}\n", "estimate: 'maybe' is not true or false"),
        ("fsx_mbps_month: {PERSISTENT_2: 1}\n", "fsx_mbps_month.PERSISTENT_2: not a price key"),
        ("a: [b\n", "not YAML or JSON"),
    ],
)
def test_bad_override_file_is_one_line_naming_field_and_value(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(UsageError) as err:
        load_file(f)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_missing_override_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"price file .*nope\.yaml"):
        load_file(tmp_path / "nope.yaml")
