"""`emulator wait` knows the emulator when it sees it: the health answer names it, and anything else
listening on the port (a web server, another tool) is refused at once with a line saying so."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hyperpod_scheduler.emulator import running_emulator
from tests.reliability.cli_inproc import cli
from tests.served import SHUTDOWN_POLL_S


class _Stranger(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"status": "ok"}'  # answers 200 on every path, as many dev servers do
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stranger() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stranger)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_emulator_wait_refuses_another_program_on_the_port(stranger: str) -> None:
    ran = cli("emulator", "wait", "--endpoint", stranger, "--timeout", "5")
    line = ran.one_error_line()
    assert "another program answers" in line and "not the hyperpod-scheduler emulator" in line, line


def test_emulator_wait_is_ready_against_the_emulator() -> None:
    with running_emulator(speed=600, seed=1) as emu:
        ran = cli("emulator", "wait", "--endpoint", emu.endpoint, "--timeout", "5")
    assert ran.code == 0 and "emulator ready" in ran.out, ran


def test_serve_on_a_held_port_says_another_program_holds_it() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        ran = cli("emulator", "serve", "--port", str(port))
    assert "another program holds the port" in ran.one_error_line()
