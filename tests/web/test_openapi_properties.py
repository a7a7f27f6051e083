"""Property-based API test: schemathesis generates requests from the app's own OpenAPI document.

Every operation, with and without the token, must answer with a documented status and a body that
matches the document; never a server error. A handful of examples per operation keeps it to seconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from hyperpod_scheduler.web import Dashboard, create_app
from tests.web.conftest import TOKEN
from tests.web.fleet import DemoFleet

# The app is built at import (schemathesis reads its document then); the fleet fills it in below.
DASH = Dashboard(token=TOKEN)
SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", create_app(DASH, allowed_hosts=["testserver"]))
OPERATIONS: list[Any] = [op.ok() for op in SCHEMA.get_all_operations()]  # type: ignore[union-attr]
EXCLUDED = [schemathesis.checks.positive_data_acceptance]  # a well-formed body may still be refused (400)


@pytest.fixture(scope="module", autouse=True)
def _wired(fleet: DemoFleet) -> Iterator[None]:
    ready = fleet.dashboard(TOKEN)
    for f in fields(Dashboard):
        setattr(DASH, f.name, getattr(ready, f.name))
    yield
    DASH.close()


def test_the_document_describes_every_api_operation() -> None:
    paths = {f"{op.method.upper()} {op.path}" for op in OPERATIONS}
    assert paths == {
        "GET /api/fleet",
        "GET /api/fleet/summary",
        "GET /api/clusters/{name}",
        "GET /api/clusters/{name}/preview/{action}",
        "GET /api/savings",
        "GET /api/schedules",
        "PUT /api/schedules/{name}",
        "POST /api/clusters/{name}/hold",
        "POST /api/clusters/{name}/release",
        "POST /api/clusters/{name}/stop",
        "POST /api/clusters/{name}/start",
    }


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: f"{op.method.upper()} {op.path}")
@pytest.mark.parametrize("with_token", [False, True], ids=["no-token", "token"])
def test_api_answers_match_the_document(op: Any, with_token: bool) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"} if with_token else None

    @given(case=op.as_strategy())
    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case: Any) -> None:
        case.call_and_validate(headers=headers, excluded_checks=EXCLUDED)

    check()
