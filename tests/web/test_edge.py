"""The dashboard's front door (web/edge.py): Host allow-list, the token and the body size checked before
the body is read, security headers on every answer, and errors that never echo what was sent."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient

from hyperpod_scheduler.web import Dashboard, create_app
from hyperpod_scheduler.web.edge import MAX_API_BODY, HostAllowList, host_name
from tests.web.conftest import TOKEN

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _client(token: str | None = TOKEN, hosts: tuple[str, ...] = ("testserver",)) -> TestClient:
    return TestClient(create_app(Dashboard(token=token), allowed_hosts=hosts), raise_server_exceptions=False)


# ---- Host ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "name"),
    [("localhost:8080", "localhost"), ("[::1]:8080", "::1"), ("Dash.Example.COM.", "dash.example.com"), ("", None)],
)
def test_host_names_are_read_like_browsers_send_them(header: str, name: str | None) -> None:
    assert host_name(header) == name


def test_loopback_addresses_and_named_hosts_are_answered_others_refused() -> None:
    hosts = HostAllowList(["dash.internal"])
    for ok in ("localhost", "127.0.0.1:8080", "[::1]", "10.1.2.3", "dash.internal:443", "DASH.internal"):
        assert hosts.allows(ok), ok
    for bad in ("evil.example", "localhost.evil.example", "127.0.0.1.nip.io", None, ""):
        assert not hosts.allows(bad), bad
    # What followed "]" or the last ":" was dropped, and the rest let in.
    for junk in ("[::1]evil.com", "127.0.0.1:evil", "localhost:", "[::1]:", "[::1]:99999", "localhost:８０"):
        assert not hosts.allows(junk), junk


def test_a_dns_rebinding_page_cannot_read_the_fleet() -> None:
    client = _client()
    answer = client.get("/api/fleet", headers={"Host": "attacker.example:8080"})
    assert answer.status_code == 421
    assert answer.json() == {"error": "this dashboard does not answer for that host name (see --allow-host)"}
    assert "attacker" not in answer.text  # never echoed
    page = client.get("/", headers={"Host": "attacker.example"})
    assert page.status_code == 421 and "attacker" not in page.text
    assert client.get("/healthz", headers={"Host": "127.0.0.1:8080"}).status_code == 200


# ---- headers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("GET", "/healthz", {}),
        ("GET", "/static/style.css", {}),
        ("GET", "/api/clusters/nope", {}),
        ("GET", "/healthz", {"Host": "evil.example"}),
        ("POST", "/api/clusters/c1/stop", {}),
        ("PUT", "/api/schedules/x", {**AUTH, "Content-Length": str(MAX_API_BODY + 1)}),
    ],
)
def test_every_answer_carries_the_security_headers(method: str, path: str, headers: dict[str, str]) -> None:
    answer = _client().request(method, path, headers=headers)
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "no-referrer"


# ---- the token and the body, before reading it -----------------------------------------------------


class CountingReceive:
    """An ASGI receive that hands out a body in 64 KiB chunks and counts what the app took."""

    def __init__(self, size: int, chunk: int = 64 * 1024) -> None:
        self.left = size
        self.chunk = chunk
        self.taken = 0

    async def __call__(self) -> dict[str, Any]:
        part = min(self.chunk, self.left)
        self.left -= part
        self.taken += part
        return {"type": "http.request", "body": b"x" * part, "more_body": self.left > 0}


def _asgi(app: Any, method: str, path: str, headers: dict[str, str], receive: CountingReceive) -> int:
    import asyncio

    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "scheme": "http",
        "server": ("127.0.0.1", 8080),
        "client": ("127.0.0.1", 5000),
        "headers": [(k.lower().encode(), v.encode()) for k, v in {"host": "127.0.0.1", **headers}.items()],
    }
    asyncio.run(app(scope, receive, send))
    return statuses[0]


@pytest.mark.parametrize(
    ("token", "headers", "status"),
    [
        (TOKEN, {}, 401),  # no token
        (TOKEN, {"Authorization": "Bearer wrong-token-123"}, 401),
        (None, AUTH, 403),  # read-only dashboard
    ],
)
def test_an_unauthorised_write_is_refused_before_one_byte_of_its_body_is_read(
    token: str | None, headers: dict[str, str], status: int
) -> None:
    app = create_app(Dashboard(token=token))
    body = CountingReceive(200 * 1024 * 1024)
    code = _asgi(app, "PUT", "/api/schedules/office", {**headers, "content-length": str(200 * 1024 * 1024)}, body)
    assert code == status and body.taken == 0


def test_a_length_of_digits_int_cannot_read_is_a_400_not_a_crash() -> None:
    # '²' (byte 0xB2 in latin-1, as ASGI hands headers over) is a digit to str.isdigit, not to int().
    app = create_app(Dashboard(token=TOKEN))
    body = CountingReceive(10)
    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    import asyncio

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "PUT",
        "path": "/api/schedules/o", "raw_path": b"/api/schedules/o", "query_string": b"", "root_path": "",
        "scheme": "http", "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 5000),
        "headers": [
            (b"host", b"127.0.0.1"), (b"authorization", f"Bearer {TOKEN}".encode()), (b"content-length", b"\xb2"),
        ],
    }  # fmt: skip
    asyncio.run(app(scope, body, send))
    assert statuses and 400 <= statuses[0] < 500


def test_a_body_over_the_limit_is_refused_by_its_length_or_as_soon_as_it_passes_it() -> None:
    app = create_app(Dashboard(token=TOKEN))
    declared = CountingReceive(10 * MAX_API_BODY)
    assert _asgi(app, "PUT", "/api/schedules/o", {**AUTH, "content-length": str(10 * MAX_API_BODY)}, declared) == 413
    assert declared.taken == 0
    chunked = CountingReceive(10 * MAX_API_BODY)  # no Content-Length: counted as it arrives
    assert _asgi(app, "PUT", "/api/schedules/o", AUTH, chunked) == 413
    assert chunked.taken <= MAX_API_BODY + chunked.chunk
    form = CountingReceive(10 * MAX_API_BODY)  # a form post carries its token inside: bounded the same way
    assert _asgi(app, "POST", "/clusters/c1/actions/stop", {}, form) == 413
    assert form.taken <= MAX_API_BODY + form.chunk


def test_a_rejected_body_is_never_echoed() -> None:
    junk = "A" * 100_000
    answer = _client().put("/api/schedules/office", headers=AUTH, json={"grid": junk})
    assert answer.status_code == 422
    assert "AAAA" not in answer.text and answer.json()["error"].startswith("body.grid: ")
    page = _client().post("/clusters/c1/actions/stop", data={"token": junk, "reason": junk})
    assert "AAAA" not in page.text


# ---- the same on a real server: 4 parallel 200 MiB uploads without a token ----------------------------


@contextmanager
def _serving(dash: Dashboard) -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(dash), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _upload_status(port: int, headers: str, sent: bytes) -> str:
    """Send the headers and the first part of a huge body, then read the status line the server gives
    without waiting for the rest (a server that reads the body first never answers here)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
        conn.sendall(headers.encode() + b"\r\n" + sent)
        return conn.recv(200).split(b"\r\n", 1)[0].decode()


def test_parallel_huge_uploads_without_a_token_are_answered_at_once() -> None:
    size = 200 * 1024 * 1024
    request = (
        "PUT /api/schedules/office HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n"
    )
    with _serving(Dashboard(token=TOKEN)) as port:
        results: list[str] = []
        threads = [
            threading.Thread(target=lambda: results.append(_upload_status(port, request, b"x" * 65536)))
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert results == ["HTTP/1.1 401 Unauthorized"] * 4
        chunked = (
            "PUT /api/schedules/office HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
            f"Authorization: Bearer {TOKEN}\r\n"
        )
        piece = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
        assert _upload_status(port, chunked, piece * 8) == "HTTP/1.1 413 Request Entity Too Large"


@pytest.mark.parametrize("path", ["/healthz", "/api/fleet/summary", "/static/style.css"])
def test_head_answers_wherever_get_does_with_its_headers_and_no_body(path: str) -> None:
    # It was a 405 on every page: an uptime probe sending HEAD saw the dashboard as broken.
    client = _client()
    got, head = client.get(path), client.head(path)
    assert got.status_code == head.status_code == 200
    assert head.content == b"" and head.headers["content-type"] == got.headers["content-type"]
    assert int(head.headers["content-length"]) > 0  # the GET's length (a summary's as_of moves between the two)
    assert head.headers["x-frame-options"] == "DENY"  # the edge's headers, as on every answer
    assert client.head("/nothing-here").status_code == 404
