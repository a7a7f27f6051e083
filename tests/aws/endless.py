"""A loopback JSON-protocol endpoint whose every page carries a new NextToken (or, with ``repeat``, the
same one again): endless pagination as a hostile or broken service would serve it. Each operation's
page comes from ``pages`` (operation -> a function of the page number giving the answer without its
token); the endpoint counts the requests it answered. After ``give_up`` pages of one operation it stops
giving a token, so a reader without bounds fails a test instead of hanging it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.served import SHUTDOWN_POLL_S

Page = Callable[[int], dict[str, Any]]


class Endless:
    def __init__(self, pages: dict[str, Page], repeat: bool = False, give_up: int = 1_000) -> None:
        self.pages = pages
        self.repeat = repeat
        self.give_up = give_up
        self.served: dict[str, int] = {}
        endless = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                operation = (self.headers.get("X-Amz-Target") or "").rpartition(".")[2]
                n = endless.served.get(operation, 0)
                endless.served[operation] = n + 1
                make = endless.pages.get(operation)
                if make is None:
                    status, answer = 400, {"__type": "ValidationException", "message": f"no {operation} here"}
                else:
                    token = "again" if endless.repeat else f"page-{n + 1}"
                    status, answer = 200, {**make(n), **({"NextToken": token} if n + 1 < endless.give_up else {})}
                body = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"


@contextmanager
def endless(pages: dict[str, Page], repeat: bool = False, give_up: int = 1_000) -> Iterator[Endless]:
    server = Endless(pages, repeat, give_up)
    server._thread.start()
    try:
        yield server
    finally:
        server._server.shutdown()
        server._server.server_close()
