"""Every error answer is one line behind the same front door as a 200: a bad query parameter is a 400
naming it, and a failure nobody foresaw is a 500 with the security headers and no traceback, logged once."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient

from hyperpod_scheduler.web import Dashboard, create_app
from tests.web.conftest import TOKEN


def _client(dash: Dashboard | None = None) -> TestClient:
    app = create_app(dash or Dashboard(token=TOKEN), allowed_hosts=["testserver"])
    return TestClient(app, raise_server_exceptions=False)


def _has_security_headers(answer: object) -> bool:
    headers = answer.headers  # type: ignore[attr-defined]
    return (
        "frame-ancestors 'none'" in headers.get("content-security-policy", "")
        and headers.get("x-frame-options") == "DENY"
        and headers.get("x-content-type-options") == "nosniff"
    )


@pytest.mark.parametrize(
    "path",
    [
        "/schedules?tz=Europe",  # a folder of zones: ZoneInfo raised IsADirectoryError
        "/api/schedules?tz=America",
        "/api/schedules?tz=" + "x" * 300,  # File name too long
        "/schedules?tz=" + "Europe/" * 40,
        "/api/schedules?tz=../../etc/passwd",
        "/api/schedules?tz=Europe%2FBerlin%00",
    ],
)
def test_a_bad_timezone_is_a_one_line_400_naming_tz(path: str) -> None:
    answer = _client().get(path)
    assert answer.status_code == 400, answer.text[:300]
    assert _has_security_headers(answer)
    assert "Traceback" not in answer.text and "xxxxxxxxxx" not in answer.text
    if path.startswith("/api"):
        message = answer.json()["error"]
        assert message.startswith("tz: ") and "is not an IANA timezone" in message and "\n" not in message


class _Broken(Dashboard):
    def fleet(self, *args: object, **kwargs: object) -> list[dict[str, object]]:
        raise RuntimeError("disk on fire\nsecond line")

    def fleet_json(self, *args: object, **kwargs: object) -> tuple[bytes, int, int]:
        raise RuntimeError("disk on fire\nsecond line")  # /api/fleet writes the kept rows out itself (issue 30)

    def fleet_page(self) -> dict[str, object]:
        raise KeyError("fleet")


@pytest.mark.parametrize(("path", "json"), [("/api/fleet", True), ("/", False)])
def test_an_unforeseen_failure_is_a_500_with_the_headers_one_line_and_no_traceback(
    path: str, json: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        answer = _client(_Broken(token=TOKEN)).get(path)
    assert answer.status_code == 500
    assert _has_security_headers(answer)
    assert "Traceback" not in answer.text and "disk on fire" not in answer.text
    if json:
        assert answer.json() == {
            "error": "internal error: the dashboard could not answer this request (the server log says why)"
        }
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(logged) == 1 and logged[0].exc_info is None, [r.getMessage() for r in logged]
    line = logged[0].getMessage()
    assert f"GET {path} failed" in line and "\n" not in line


def test_a_path_no_route_matches_is_a_404_in_the_api_error_shape() -> None:
    # A cluster name with a slash matches no route: Starlette answered {"detail": "Not Found"}.
    answer = _client().get("/api/clusters/a%2Fb")
    assert answer.status_code == 404 and answer.json() == {"error": "Not Found"}
    assert _has_security_headers(answer)


@pytest.mark.parametrize("path", ["/api/clusters/x/preview/stop%2F", "/savings/", "/api/fleet/"])
def test_a_path_ending_in_a_slash_is_a_404_not_a_redirect(path: str) -> None:
    # Starlette redirected these (307) to the path without the slash: for a cluster's action the `%2F`
    # at the end, decoded to that slash, sent the viewer to another address than the one asked for.
    answer = _client().get(path, follow_redirects=False)
    assert answer.status_code == 404 and "location" not in answer.headers
    if path.startswith("/api/"):
        assert answer.json() == {"error": "Not Found"}
    else:  # a page: the dashboard's own 404 page, as for any path no route matches
        assert answer.headers["content-type"].startswith("text/html") and "<!doctype html>" in answer.text
    assert _has_security_headers(answer)
