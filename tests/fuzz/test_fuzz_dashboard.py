"""Fuzzed dashboard requests: every GET route, found in the app itself, with each of its path and query
parameters given a good, odd or hostile value (timezones that are folders or 300 characters, instants in
year 1, escape codes, NUL, lone surrogates, unknown clusters); and half-open connections (requests cut off
anywhere before their headers end) held against the served dashboard. Every answer is a documented
status with the security headers and no traceback; ``/healthz`` answers whatever is held."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import fields
from urllib.parse import quote

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_scheduler.web import Dashboard, create_app
from tests.fuzz.budget import bounded, examples
from tests.web.conftest import TOKEN, fleet  # noqa: F401 - the demo fleet fixture
from tests.web.fleet import DemoFleet
from tests.web.test_slowloris import HALF_OPEN, _healthz, _server, serving

DASH = Dashboard(token=TOKEN)
APP = create_app(DASH, allowed_hosts=["testserver"])
GET_ROUTES = sorted(
    (r for r in APP.routes if isinstance(r, APIRoute) and "GET" in r.methods),
    key=lambda r: r.path,
)
DOCUMENTED = {200, 400, 404, 422}
VALUES = [
    "", "UTC", "Europe/Berlin", "Europe", "America", "x" * 300, "Europe/" * 40, "../../etc/passwd", "/etc/passwd",
    "2026-12-01T08:00Z", "0001-01-01T00:00Z", "9999-12-31T23:59-05:00", "yesterday", "nan", "1e999", "9" * 400,
    "\x00", "\x1b[2J", "\u202e", "\udcff", "a b", "[/]", "{{x}}", "<script>", "p5-training", "g5-dev", "nope",
    "stop", "start", "hold", "a" * 64,
]  # fmt: skip
_VALUE = st.one_of(st.sampled_from(VALUES), st.text(max_size=40))


@pytest.fixture(scope="module", autouse=True)
def _wired(fleet: DemoFleet) -> Iterator[None]:  # noqa: F811
    ready = fleet.dashboard(TOKEN)
    for f in fields(Dashboard):
        setattr(DASH, f.name, getattr(ready, f.name))
    yield
    DASH.close()


def test_every_get_route_is_fuzzed() -> None:
    # A new route is drawn from without a change here; this only makes sure the list is not empty.
    paths = {r.path for r in GET_ROUTES}
    assert {"/schedules", "/api/schedules", "/savings", "/api/clusters/{name}", "/healthz"} <= paths


def _url(route: APIRoute, path_values: dict[str, str], query: dict[str, str]) -> str:
    path = route.path_format
    for name, value in path_values.items():
        path = path.replace("{" + name + "}", quote(value.encode("utf-8", "surrogatepass"), safe="") or "x")
    pairs = "&".join(f"{quote(k)}={quote(v.encode('utf-8', 'surrogatepass'), safe='')}" for k, v in query.items())
    return path + (f"?{pairs}" if pairs else "")


@st.composite
def _request(draw: st.DrawFn) -> str:
    route = draw(st.sampled_from(GET_ROUTES))
    path_values = {p.name: draw(_VALUE) for p in route.dependant.path_params}
    names = [p.alias for p in route.dependant.query_params]
    chosen = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    return _url(route, path_values, {n: draw(_VALUE) for n in chosen})


@given(url=_request())
@examples(60)
def test_every_query_parameter_of_every_route_gets_a_documented_answer(url: str) -> None:
    client = TestClient(APP, raise_server_exceptions=False)
    answer = bounded(lambda: client.get(url, follow_redirects=False), f"GET {url[:80]}")
    assert answer.status_code in DOCUMENTED, (url[:200], answer.status_code, answer.text[:300])
    assert "frame-ancestors 'none'" in answer.headers.get("content-security-policy", ""), url[:200]
    assert answer.headers.get("x-content-type-options") == "nosniff"
    assert "Traceback" not in answer.text
    if answer.status_code != 200 and url.startswith("/api"):
        message = answer.json()["error"]
        assert "\n" not in message and len(message) <= 300


PREFIXES = [HALF_OPEN, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"POST /api/x HTTP/1.1\r\n"]


@st.composite
def _half_open(draw: st.DrawFn) -> bytes:
    """A request cut off before the blank line that ends its headers, or bytes that never make one."""
    whole = draw(
        st.sampled_from([HALF_OPEN, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"POST /api/x HTTP/1.1\r\n"])
    )
    cut = whole[: draw(st.integers(0, len(whole)))]
    tail = draw(st.binary(max_size=64)).replace(b"\r\n\r\n", b"\r\n").replace(b"\n\n", b"\n")
    return cut + tail if not (cut + tail).endswith(b"\r\n\r") else cut


@pytest.fixture(scope="module")
def served() -> Iterator[int]:
    with serving(_server(max_connections=8, header_timeout_s=5.0)) as port:
        yield port


@given(held=st.lists(_half_open(), min_size=1, max_size=30))
@examples(8)
def test_healthz_answers_whatever_half_open_connections_are_held(served: int, held: list[bytes]) -> None:
    with ExitStack() as stack:
        for first in held:
            conn = stack.enter_context(socket.create_connection(("127.0.0.1", served), timeout=30))
            with contextlib.suppress(OSError):
                conn.sendall(first)
        assert bounded(lambda: _healthz(served), "GET /healthz") == 200
