"""Loopback endpoints that misbehave in time and size: ones that drip their answer a byte at a time, one
that accepts and says nothing, one that sends far too much. Raw sockets, so nothing in between buffers
or times out on our behalf."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Behaviour = Callable[[socket.socket, threading.Event], None]


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head


def drip(every_s: float = 0.25, length: int = 10_000) -> Behaviour:
    """Headers at once, then one byte of body every ``every_s`` seconds (never a gap a per-read
    timeout would notice)."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        _read_request(conn)
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\n"
            + f"Content-Length: {length}\r\n\r\n".encode()
            + b"{"
        )
        for _ in range(length - 1):
            if stop.wait(every_s):
                return
            conn.sendall(b" ")

    return behave


def drip_headers(every_s: float = 0.25) -> Behaviour:
    """The status line and headers one byte every ``every_s`` seconds: the answer never gets as far as
    a body (a deadline kept only while the body is read would never notice)."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        _read_request(conn)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\n" + b"X-Pad: a\r\n" * 1000
        for byte in head:
            if stop.wait(every_s):
                return
            conn.sendall(bytes([byte]))

    return behave


def silent() -> Behaviour:
    def behave(conn: socket.socket, stop: threading.Event) -> None:
        _read_request(conn)
        stop.wait(600)

    return behave


def huge(size: int, declared: bool = True) -> Behaviour:
    """A 200 answer of ``size`` bytes, with its Content-Length or chunked (so only counting finds it)."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        _read_request(conn)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\n"
        piece = b" " * 65536
        try:
            if declared:
                conn.sendall(head + f"Content-Length: {size}\r\n\r\n".encode())
                for _ in range(size // len(piece)):
                    if stop.is_set():
                        return
                    conn.sendall(piece)
            else:
                conn.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n")
                for _ in range(size // len(piece)):
                    if stop.is_set():
                        return
                    conn.sendall(b"10000\r\n" + piece + b"\r\n")
                conn.sendall(b"0\r\n\r\n")
        except OSError:
            return  # the client hung up, as it should

    return behave


class Endpoint:
    def __init__(self, behave: Behaviour) -> None:
        self.behave = behave
        self.stop = threading.Event()
        self.connections = 0
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            self.behave(conn, self.stop)

    def close(self) -> None:
        self.stop.set()
        self._sock.close()
        self._thread.join(5)


@contextmanager
def endpoint(behave: Behaviour) -> Iterator[Endpoint]:
    e = Endpoint(behave)
    try:
        yield e
    finally:
        e.close()
