"""How the dashboard is served: uvicorn's HTTP/1.1 server with the bounds a browser never reaches and a
slowloris always does, and a log that stays one line a kind.

Without them 1,100 half-open requests (headers never finished) held a descriptor each until the process
reached its 1,024-descriptor limit; ``/healthz`` then timed out, and the accept loop wrote 118 MB of
tracebacks in 27 s. Now:

- a request's line and headers must arrive within ``HEADER_TIMEOUT_S`` of the connection (or of the
  previous answer on a kept-alive one), its body within ``BODY_TIMEOUT_S`` of its headers; a connection
  that is late is closed without an answer;
- at most ``connection_cap()`` connections are open; one more closes the oldest connection still waiting
  for its headers (a real client sends them at once), or, when every one is busy answering, is itself
  answered 503 and closed; so a flood of half-open connections cannot keep ``/healthz`` out;
- the request line and headers are at most ``MAX_HEADER_BYTES``; the listen backlog is ``BACKLOG``;
- uvicorn's and asyncio's log lines are one line each (no traceback), and a line that repeats is written
  the 1st, 2nd, 4th, 8th... time with its count: a flood costs a few lines, not megabytes.

uvicorn's own ``limit_concurrency`` is not used: it answers 503 to every request, ``/healthz`` included,
once half-open connections fill it, which is the failure this module exists to prevent.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from hyperpod_scheduler.inputs.text import clean, shortened
from hyperpod_scheduler.web.edge import SECURITY_HEADERS

HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0  # the largest body (256 KiB, web/edge.py) at about 9 KB/s
KEEP_ALIVE_S = 5  # an idle kept-alive connection is closed after this (uvicorn's default)
MAX_CONNECTIONS = 256
RESERVED_DESCRIPTORS = 64  # the store, the config, the AWS clients' connections, the log
MAX_HEADER_BYTES = 16 * 1024  # h11's default, stated: a request line and headers larger are a 400
BACKLOG = 128
_LOG_KEYS = 1000  # distinct log lines remembered for counting; more are written as they come
_SERVICE_UNAVAILABLE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    b"x-content-type-options: nosniff\r\ncache-control: no-store\r\ncontent-length: 38\r\n\r\n"
    b"too many connections: try again later\n"
)


def connection_cap(limit: int = MAX_CONNECTIONS) -> int:
    """``limit``, or fewer when the process may open fewer descriptors: a quarter of what is left after
    ``RESERVED_DESCRIPTORS``. asyncio accepts up to a backlog's worth of connections in one go before any
    is looked at, and a connection closed to make room lets go of its descriptor a moment later, so the
    open connections, one burst and the ones being closed (cap + 2 x backlog) must fit."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # no resource module (Windows): the figure as given
        return limit
    if soft == resource.RLIM_INFINITY:
        return limit
    return max(4, min(limit, (int(soft) - RESERVED_DESCRIPTORS) // 4))


def listen_backlog(cap: int) -> int:
    """``BACKLOG``, or the cap when that is smaller (the accept burst is bounded by the backlog)."""
    return min(BACKLOG, cap)


class BoundedH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers and body, and the connection cap.
    ``bounded_server`` makes a subclass with the figures it is given."""

    header_timeout_s = HEADER_TIMEOUT_S
    body_timeout_s = BODY_TIMEOUT_S
    cap = MAX_CONNECTIONS
    _order = itertools.count()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._opened = next(self._order)
        self._timer: asyncio.TimerHandle | None = None
        self._waiting_for: str | None = None
        self._watch()
        self._make_room()

    def data_received(self, data: bytes) -> None:
        try:
            super().data_received(data)
        except Exception as exc:  # e.g. a request target that is not ASCII: a 400, not a traceback
            self.logger.warning("bad request from a client: %s", type(exc).__name__)
            if not self.transport.is_closing():
                self.send_400_response("Invalid HTTP request received.")
            return
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a malformed request, with the security headers every answer carries."""
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close"), *SECURITY_HEADERS]
        try:
            out = self.conn.send(h11.Response(status_code=400, headers=headers, reason=b"Bad Request"))
            out = (out or b"") + (self.conn.send(h11.Data(data=msg.encode("ascii"))) or b"")
            out += self.conn.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:  # an answer was already under way: nothing more can be said
            out = b""
        if out:
            self.transport.write(out)
        self.transport.close()

    # ---- deadlines -------------------------------------------------------------------------------------
    def waiting_for_headers(self) -> bool:
        return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

    def _phase(self) -> str | None:
        if self.transport.is_closing():
            return None
        if self.waiting_for_headers():
            return "headers"
        return "body" if self.conn.their_state is h11.SEND_BODY else None

    def _watch(self) -> None:
        """Keep one timer for what the connection waits for now (its headers, its body, or nothing)."""
        phase = self._phase()
        if phase == self._waiting_for:
            return
        self._cancel()
        self._waiting_for = phase
        if phase is not None:
            delay = self.header_timeout_s if phase == "headers" else self.body_timeout_s
            self._timer = self.loop.call_later(delay, self._late, phase)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiting_for = None

    def _late(self, phase: str) -> None:
        self._timer = None
        if self._phase() == phase:
            self.transport.close()  # no answer: a client this slow is not reading one
        else:
            self._waiting_for = None
            self._watch()

    # ---- the cap ---------------------------------------------------------------------------------------
    def _make_room(self) -> None:
        live = [c for c in self.connections if isinstance(c, BoundedH11) and not c.transport.is_closing()]
        if len(live) <= self.cap:
            return
        idle = [c for c in live if c is not self and c.waiting_for_headers()]
        if idle:
            min(idle, key=lambda c: c._opened).transport.close()
            return
        self.transport.write(_SERVICE_UNAVAILABLE)
        self.transport.close()


class OneLineLog(logging.Filter):
    """Each record one line without a traceback (the exception's kind and first words instead), and a line
    seen before written again only at its 2nd, 4th, 8th... time, with the count."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: Counter[str] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage().split("\n", 1)[0]  # asyncio adds the context on the next lines
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            text = f"{text}: {type(exc).__name__}: {shortened(str(exc), 200)}"
        text = clean(shortened(text, 500), one_line=True)
        key = text[:120]
        if key in self.seen or len(self.seen) < _LOG_KEYS:
            self.seen[key] += 1
            count = self.seen[key]
            if count & (count - 1):  # not a power of two: counted, not written
                return False
            if count > 1:
                text = f"{text} ({count} times so far)"
        record.msg, record.args, record.exc_info, record.exc_text, record.stack_info = text, None, None, None, None
        return True


_LOGGERS = ("uvicorn.error", "asyncio", "hyperpod_scheduler.web")


class BoundedServer(uvicorn.Server):
    """uvicorn's server with ``OneLineLog`` on the loggers a request can reach while it serves."""

    async def serve(self, sockets: Any = None) -> None:
        one_line = OneLineLog()
        loggers = [logging.getLogger(name) for name in _LOGGERS]
        for logger in loggers:
            logger.addFilter(one_line)
        try:
            await super().serve(sockets=sockets)
        finally:
            for logger in loggers:
                logger.removeFilter(one_line)


def bounded_server(
    app: Any,
    *,
    header_timeout_s: float = HEADER_TIMEOUT_S,
    body_timeout_s: float = BODY_TIMEOUT_S,
    max_connections: int = MAX_CONNECTIONS,
    log_level: str = "warning",
) -> BoundedServer:
    """A server for ``app`` with these bounds (run it with ``.run(sockets=[sock])``)."""
    cap = connection_cap(max_connections)
    figures = {"header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s, "cap": cap}
    protocol = type("DashboardH11", (BoundedH11,), figures)
    config = uvicorn.Config(
        app,
        http=protocol,
        log_level=log_level,
        backlog=listen_backlog(cap),
        timeout_keep_alive=KEEP_ALIVE_S,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )
    return BoundedServer(config)
