"""A loopback proxy in front of the emulator that can rewrite its answers: how a test shows the scheduler
an answer from a newer AWS (a member botocore does not know) or a damaged one, without teaching the
emulator anything the real service would not do."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.served import SHUTDOWN_POLL_S

Rewrite = Callable[[str, Any], Any]  # (operation, decoded answer) -> answer to send (or bytes)


class AnswerProxy:
    def __init__(self, upstream: str, rewrite: Rewrite) -> None:
        self.upstream = upstream
        self.rewrite = rewrite
        self.requests: list[tuple[str, dict[str, Any]]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                operation = (self.headers.get("X-Amz-Target") or "").removeprefix("SageMaker.")
                proxy.requests.append((operation, json.loads(body or b"{}")))
                forward = urllib.request.Request(proxy.upstream, data=body, method="POST")
                for key in ("X-Amz-Target", "Content-Type", "Authorization", "X-Amz-Date"):
                    if self.headers.get(key):
                        forward.add_header(key, self.headers[key])
                try:
                    with urllib.request.urlopen(forward, timeout=30) as answer:
                        status, payload, ctype = answer.status, answer.read(), answer.headers.get("Content-Type")
                except urllib.error.HTTPError as exc:
                    status, payload, ctype = exc.code, exc.read(), exc.headers.get("Content-Type")
                if status == 200:
                    changed = proxy.rewrite(operation, json.loads(payload))
                    payload = changed if isinstance(changed, bytes) else json.dumps(changed).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype or "application/x-amz-json-1.1")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
        )

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def sent(self, operation: str) -> list[dict[str, Any]]:
        return [body for op, body in self.requests if op == operation]

    def start(self) -> AnswerProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def answer_proxy(upstream: str, rewrite: Rewrite) -> Iterator[AnswerProxy]:
    proxy = AnswerProxy(upstream, rewrite).start()
    try:
        yield proxy
    finally:
        proxy.close()


def add_to_group(group: str, member: str, value: Any) -> Rewrite:
    """A rewrite that adds ``member`` to ``group`` in every DescribeCluster answer."""

    def rewrite(operation: str, answer: Any) -> Any:
        if operation == "DescribeCluster":
            for g in answer.get("InstanceGroups", []):
                if g.get("InstanceGroupName") == group:
                    g[member] = value
        return answer

    return rewrite
