"""The dashboard's front door, in front of every route: the Host allow-list, the access token and the
body size checked before a byte of the body is read, and the security headers on every answer.

Without it, four parallel 200 MiB bodies without a token took the process to 1.8 GiB before the token
was looked at; a page on any domain that resolves to 127.0.0.1 (DNS rebinding) could read the fleet;
and the confirm pages could be framed by another site. Refusals here never quote the request.

A failure nobody foresaw is answered here too: a 500 with the security headers and one line, never a
traceback (Starlette's own 500 is sent outside this middleware, without the headers), and one line in
the log naming the route and the kind of error.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from hyperpod_scheduler.inputs.redact import scrub
from hyperpod_scheduler.inputs.text import clean, digits, shortened

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# API bodies are a hold or a 7x96 grid of booleans (about 4 KiB); form posts the same grid as
# checkbox names (about 10 KiB). Both limits are generous and still far from hurting.
MAX_API_BODY = 256 * 1024
MAX_FORM_BODY = 256 * 1024
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

SECURITY_HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
        b"base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)
log = logging.getLogger("hyperpod_scheduler.web")
INTERNAL_ERROR = "internal error: the dashboard could not answer this request (the server log says why)"
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def host_name(header: str) -> str | None:
    """The host part of a Host header (``[::1]:8080`` -> ``::1``, ``Example.COM.`` -> ``example.com``), or
    None when the header is not a host with an optional port: whatever followed ``]`` or the last ``:``
    (``[::1]evil.com``, ``127.0.0.1:evil``) was dropped and the rest let in."""
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1 :] if end > 0 else ""
        if end <= 0 or not (rest == "" or (rest.startswith(":") and _port(rest[1:]))):
            return None
        return value[1:end]
    if value.count(":") == 1:
        value, port = value.split(":")
        if not _port(port):
            return None
    return value.rstrip(".") or None


def _port(text: str) -> bool:
    return digits(text) and 0 < int(text) < 65536


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostAllowList:
    """Loopback names, IP literals (a DNS-rebinding page always sends its own domain name, never an
    address), and the names the dashboard was told to answer for (``--host``, ``--allow-host``)."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names = {n for n in (host_name(x) for x in names) if n} | _LOOPBACK_NAMES

    def allows(self, header: str | None) -> bool:
        name = host_name(header) if header else None
        return name is not None and (name in self.names or _is_ip(name))


class Edge:
    """Pure ASGI middleware (so it sees the request before Starlette reads anything)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: HostAllowList,
        token_ok: Callable[[str | None], bool],
        read_only: Callable[[], bool],
        max_api_body: int = MAX_API_BODY,
        max_form_body: int = MAX_FORM_BODY,
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.token_ok = token_ok
        self.read_only = read_only
        self.max_api_body = max_api_body
        self.max_form_body = max_form_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started: list[bool] = []
        send = _with_headers(send, started)
        try:
            await self._door(scope, receive, send)
        except Exception as exc:  # the one place an unforeseen failure becomes an answer
            where = clean(f"{scope.get('method')} {scope.get('path', '')}", one_line=True)
            why = scrub(clean(shortened(str(exc), 200), one_line=True))
            log.error("dashboard: %s failed: %s: %s", shortened(where, 200), type(exc).__name__, why)
            if not started:
                await _refuse(send, 500, INTERNAL_ERROR, str(scope.get("path", "")).startswith("/api"))

    async def _door(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path = str(scope.get("path", ""))
        api = path.startswith("/api")
        if not self.hosts.allows(headers.get("host")):
            await _refuse(send, 421, "this dashboard does not answer for that host name (see --allow-host)", api)
            return
        if scope.get("method") == "HEAD":
            # HTTP asks a server to answer HEAD wherever it answers GET (uptime probes send it): the GET's
            # status and headers (its Content-Length too), without the body.
            await self.app({**scope, "method": "GET"}, receive, _without_body(send))
            return
        if scope.get("method") not in WRITE_METHODS:
            await self.app(scope, receive, send)
            return
        if self.read_only():
            await _refuse(send, 403, "the dashboard is read-only: it was started without an access token", api)
            return
        if api and not self.token_ok(_bearer(headers.get("authorization"))):
            await _refuse(send, 401, "access token missing or wrong: action refused", api)
            return
        limit = self.max_api_body if api else self.max_form_body
        length = headers.get("content-length")
        if length is not None and (not digits(length) or int(length) > limit):
            await _refuse(send, 413, f"request body larger than {limit // 1024} KiB", api)
            return
        try:
            body = await _read_body(receive, limit)
        except _Gone:  # the client left (or was cut off) halfway: no request, nothing to answer
            return
        if body is None:
            await _refuse(send, 413, f"request body larger than {limit // 1024} KiB", api)
            return
        await self.app(scope, _replay(body, receive), send)


def _without_body(send: Send) -> Send:
    async def headers_only(message: Message) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return headers_only


def _bearer(authorization: str | None) -> str | None:
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return None


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None as soon as it passes ``limit`` (a chunked upload without Content-Length)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Gone  # half a body is not the body: a truncated form must not act
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class _Gone(Exception):
    """The client disconnected before its body was whole."""


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _with_headers(send: Send, started: list[bool]) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            started.append(True)
            present = {k.lower() for k, _ in message.get("headers", [])}
            message["headers"] = [*message.get("headers", []), *(h for h in SECURITY_HEADERS if h[0] not in present)]
        await send(message)

    return sending


async def _refuse(send: Send, status: int, message: str, api: bool) -> None:
    if api:
        body, kind = json.dumps({"error": message}).encode(), b"application/json"
    else:
        body, kind = f"<!doctype html><title>Refused</title><p>{message}</p>\n".encode(), b"text/html; charset=utf-8"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
