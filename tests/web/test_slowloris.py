"""The dashboard's server under connections that never finish (web/serving.py): a header and a body
deadline, a cap on connections that makes room by closing the oldest half-open one, and a log that stays
a few lines. Loopback only, a modest number of connections, every wait bounded."""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from hyperpod_scheduler.web import Dashboard, create_app
from hyperpod_scheduler.web.serving import BoundedServer, OneLineLog, bounded_server
from tests.served import first_page, url_in_output
from tests.web.conftest import TOKEN

HALF_OPEN = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "  # the blank line that ends headers never comes
WAIT_S = 30.0  # how long a test waits for what must happen (a bound on failure, not a timing claim)


@contextmanager
def serving(server: BoundedServer) -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_S
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _server(**bounds: float) -> BoundedServer:
    return bounded_server(create_app(Dashboard(token=TOKEN)), **bounds)  # type: ignore[arg-type]


def _half_open(port: int, stack: ExitStack, first: bytes = HALF_OPEN) -> socket.socket:
    conn = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=WAIT_S))
    with contextlib.suppress(OSError):  # already closed by the server to make room: that is the point
        conn.sendall(first)
    return conn


def _closed_without_an_answer(conn: socket.socket) -> bool:
    try:
        return conn.recv(100) == b""
    except ConnectionResetError:
        return True


def _healthz(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=WAIT_S) as answer:
        return int(answer.status)


def test_a_connection_whose_headers_never_end_is_closed_at_the_header_deadline() -> None:
    with serving(_server(header_timeout_s=0.2)) as port, ExitStack() as stack:
        slow = _half_open(port, stack)
        assert _closed_without_an_answer(slow)
        assert _healthz(port) == 200


def test_a_kept_alive_connection_that_trickles_a_byte_is_closed_too() -> None:
    # uvicorn's keep-alive timer stops at the first byte of the next request; the header deadline does not.
    with serving(_server(header_timeout_s=0.2)) as port, ExitStack() as stack:
        conn = _half_open(port, stack, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nG")
        answer = b""
        while b'"status":"ok"' not in answer:
            part = conn.recv(4096)
            assert part, answer
            answer += part
        assert _closed_without_an_answer(conn)


def test_a_body_that_never_ends_is_cut_off_and_never_acted_on() -> None:
    head = (
        b"POST /clusters/c1/actions/stop HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\ntoken="
    )
    with serving(_server(body_timeout_s=0.2)) as port, ExitStack() as stack:
        assert _closed_without_an_answer(_half_open(port, stack, head))


def test_healthz_answers_while_more_half_open_connections_than_the_cap_are_held() -> None:
    with serving(_server(max_connections=16)) as port, ExitStack() as stack:
        held = [_half_open(port, stack) for _ in range(40)]
        assert _healthz(port) == 200
        assert _closed_without_an_answer(held[0])  # the oldest made room


def test_repeated_log_lines_are_written_a_few_times_with_their_count_and_never_a_traceback() -> None:
    one_line = OneLineLog()
    written = []
    for n in range(1000):
        try:
            raise OSError(24, "Too many open files")
        except OSError:
            record = logging.LogRecord("asyncio", logging.ERROR, __file__, 1, "accept failed\nsocket: %s", (n,), None)
            record.exc_info = sys.exc_info()
        if one_line.filter(record):
            written.append(logging.Formatter().format(record))
    assert len(written) == 10  # the 1st, 2nd, 4th ... 512th
    assert all("\n" not in line and "Traceback" not in line for line in written)
    assert written[0] == "accept failed: OSError: [Errno 24] Too many open files"
    assert written[-1].endswith("(512 times so far)")


def test_a_request_line_that_is_not_ascii_is_a_400_with_the_headers_not_a_traceback() -> None:
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    keep = Keep()
    for name in ("uvicorn.error", "asyncio"):
        logging.getLogger(name).addHandler(keep)
    try:
        with serving(_server()) as port, socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as conn:
            conn.sendall(b"GET /\xff\xfe HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b""
            while part := conn.recv(4096):
                answer += part
    finally:
        for name in ("uvicorn.error", "asyncio"):
            logging.getLogger(name).removeHandler(keep)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"x-content-type-options: nosniff" in answer.lower() and b"frame-ancestors 'none'" in answer
    assert all("Traceback" not in line and "\n" not in line for line in lines), lines


# ---- the real command, at a low descriptor limit -------------------------------------------------------


def _low_descriptor_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def test_the_dashboard_command_answers_healthz_under_a_slowloris_and_its_log_stays_small(tmp_path: Path) -> None:
    config = tmp_path / "hyperpod-scheduler.yaml"
    config.write_text("{}\n")
    log = tmp_path / "stderr.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HYPERPOD_SCHEDULER_", "AWS_"))}
    command = [sys.executable, "-m", "hyperpod_scheduler.cli.main", "dashboard", "--port", "0"]
    with log.open("w") as err, ExitStack() as stack:
        proc = subprocess.Popen(
            [*command, "--config", str(config), "--state", "memory:"],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=tmp_path,
            env=env,
            preexec_fn=_low_descriptor_limit,  # 256 descriptors: 300 half-open connections would exhaust them
        )
        stack.callback(proc.wait, 20)
        stack.callback(proc.terminate)
        seen: list[str] = []
        url = url_in_output(proc, r"dashboard on (http://127\.0\.0\.1:\d+/)", 120, seen)
        assert url is not None, seen
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        assert '"ok"' in first_page(f"{url}healthz", 100, 0.1)  # the URL is printed before it listens
        for _ in range(300):
            _half_open(port, stack)
        assert _healthz(port) == 200
    written = log.read_text()
    assert len(written) < 4096 and "Traceback" not in written, written[:2000]
