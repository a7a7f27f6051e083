"""A dashboard address's ?account=&region=&profile= (web/places): each part checked, a bad one a 400
naming the parameter; a checked place's own query reads back as the same place."""

from __future__ import annotations

from urllib.parse import parse_qs

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.web.places import Place, asked


@pytest.mark.parametrize(
    ("account", "region", "field"),
    [
        ("12345678901", None, "account"),
        ("1234567890123", None, "account"),
        ("123456789012' OR 1=1", None, "account"),
        (None, "us-east-\u0661", "region"),  # an Arabic-Indic digit: \d matched it
        (None, "us-east-\uff11", "region"),  # a fullwidth 1
        (None, "US-EAST-1", "region"),
        (None, "us-east-1/../x", "region"),
    ],
)
def test_a_bad_part_is_refused_naming_it(account: str | None, region: str | None, field: str) -> None:
    with pytest.raises(UsageError, match=f"^{field}: "):
        asked(account, region, None)


@given(st.text(max_size=20), st.text(max_size=20), st.text(max_size=20))
def test_any_address_is_refused_by_field_or_reads_back_as_itself(account: str, region: str, profile: str) -> None:
    try:
        place = asked(account, region, profile)
    except UsageError as exc:
        assert str(exc).split(":")[0] in ("account", "region", "profile")
        return
    for part in (place.account, place.region, place.profile):
        assert part is None or part.isascii()
    back = {k: v[0] for k, v in parse_qs(place.query()).items()}
    again = asked(back.get("account"), back.get("region"), back.get("profile"))
    assert again == Place(place.account, place.region, None if place.account else place.profile)


@pytest.mark.parametrize(
    "fields",
    [
        {"account": "\u0661" * 12},  # twelve Arabic-Indic digits passed `\d{12}`
        {"account": "123456789012", "role_arn": "arn:aws:iam::" + "\uff11" * 12 + ":role/x"},
        {"account": "123456789012", "role_arn": "arn:aws:iam::123456789012:role/r\u00f4le"},
    ],
)
def test_a_fleet_targets_account_and_role_are_ascii(fields: dict[str, str]) -> None:
    # An account the fleet config accepted and every record key refuses (store.records: [0-9]{12}).
    from pydantic import ValidationError

    from hyperpod_scheduler.deploy.fleet_config import FleetTarget

    with pytest.raises(ValidationError):
        FleetTarget.model_validate({"region": "us-east-1", **fields})
