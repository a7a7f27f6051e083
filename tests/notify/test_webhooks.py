"""Webhooks as a careful client posts them: https or an allowed loopback only, public addresses checked
and pinned, no redirects, one deadline per attempt, retries with backoff, delivered off the engine's
path (a slow receiver never holds a lease), and a drain deadline at exit. No error quotes the URL."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from hyperpod_scheduler.engine.events import Event
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.notify.channels import Message, Notifier
from hyperpod_scheduler.notify.webhook import WebhookChannel, WebhookError, parse_url
from hyperpod_scheduler.store.memory import MemoryStore
from tests.served import SHUTDOWN_POLL_S

AT = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
BLOCKED = Event(AT, "c1", "blocked", "stop blocked: checkpoints")
MESSAGE = Message("hyperpod-scheduler: c1: stop blocked", "text")
SECRET = "T0FAKE/B0FAKE/webhookSecret77"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (f"file:///etc/passwd?{SECRET}", "must be an https:// URL"),
        (f"ftp://hooks.example.com/{SECRET}", "must be an https:// URL"),
        (f"http://hooks.example.com/{SECRET}", "must be an https:// URL"),
        (f"http://127.0.0.1:8080/{SECRET}", "must be an https:// URL"),
        (f"https://localhost/{SECRET}", "points at this machine"),
        (f"https://user:pw@hooks.example.com/{SECRET}", "must not carry a user name or password"),
        (f"https://169.254.169.254/latest/meta-data/{SECRET}", "link-local"),
        (f"https://[fd00:ec2::254]/{SECRET}", "private or reserved"),
        (f"https://10.1.2.3/{SECRET}", "private or reserved"),
        (f"https://100.100.100.200/{SECRET}", "private or reserved"),
        (f"https://0.0.0.0/{SECRET}", "private or reserved"),
        (f"https://[::ffff:127.0.0.1]/{SECRET}", "this machine"),
        (f"https://[::ffff:169.254.169.254]/{SECRET}", "link-local"),
        (f"https://hooks.example.com:99999/{SECRET}", "not a URL"),
        (f"https:///{SECRET}", "names no host"),
    ],
)
def test_unsafe_urls_are_refused_without_quoting_them(url: str, said: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_url(url)
    assert said in str(refused.value)
    assert SECRET not in str(refused.value) and "webhookSecret77" not in str(refused.value)


def test_a_loopback_receiver_is_allowed_only_when_asked() -> None:
    assert parse_url("http://127.0.0.1:9/x", allow_loopback=True).port == 9
    assert parse_url("https://hooks.slack.com/services/T/B/X").port == 443


def test_a_config_with_an_unsafe_webhook_is_one_line_without_the_url(tmp_path: Any) -> None:
    from tests.reliability.cli_inproc import cli

    config = tmp_path / "c.yaml"
    config.write_text(f"notifications: {{webhook_url: 'http://169.254.169.254/{SECRET}'}}\n")
    line = cli("status", "--config", str(config), "--state", "memory:").one_error_line()
    assert "notifications: Value error, webhook_url: must be an https:// URL" in line and SECRET not in line


# ---- a receiver on loopback that can be told how to misbehave -------------------------------------


class Receiver:
    def __init__(self, answer: Callable[[BaseHTTPRequestHandler, int], None]) -> None:
        self.paths: list[str] = []
        self.hosts: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.paths.append(self.path)
                receiver.hosts.append(self.headers.get("Host", ""))
                answer(self, len(receiver.paths))

            do_GET = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
        ).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, path: str = f"/services/{SECRET}") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@contextmanager
def receiver(answer: Callable[[BaseHTTPRequestHandler, int], None]) -> Iterator[Receiver]:
    r = Receiver(answer)
    try:
        yield r
    finally:
        r.server.shutdown()
        r.server.server_close()


def ok(handler: BaseHTTPRequestHandler, n: int) -> None:
    handler.send_response(200)
    handler.end_headers()
    handler.wfile.write(b"ok")


def status(code: int, times: int = 10**6) -> Callable[[BaseHTTPRequestHandler, int], None]:
    def answer(handler: BaseHTTPRequestHandler, n: int) -> None:
        handler.send_response(code if n <= times else 200)
        handler.end_headers()

    return answer


def drip(handler: BaseHTTPRequestHandler, n: int) -> None:
    try:
        for byte in b"HTTP/1.1 200 OK\r\n\r\nok":
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.5)
    except OSError:
        return


def test_a_redirect_is_refused_and_never_followed() -> None:
    def redirect(handler: BaseHTTPRequestHandler, n: int) -> None:
        handler.send_response(302)
        port = handler.server.server_address[1]
        handler.send_header("Location", f"http://127.0.0.1:{port}/latest/meta-data/iam/security-credentials/")
        handler.end_headers()

    with receiver(redirect) as r:
        with pytest.raises(WebhookError, match="HTTP 302: redirect refused") as caught:
            WebhookChannel(r.url(), allow_loopback=True).send(MESSAGE)
        assert not caught.value.retry
        assert r.paths == [f"/services/{SECRET}"]  # the metadata path was never asked for


def test_a_dripping_receiver_is_cut_off_at_the_deadline() -> None:
    with receiver(drip) as r:
        started = time.monotonic()
        with pytest.raises(WebhookError, match=r"no answer within 1 s") as caught:
            WebhookChannel(r.url(), timeout_s=1, allow_loopback=True).send(MESSAGE)
        assert time.monotonic() - started < 2.5 and caught.value.retry


def test_a_name_is_checked_on_every_address_and_the_checked_address_is_the_one_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = {
        "mixed.example.com": ["8.8.8.8", "10.0.0.7"],  # one private address among public ones
        "rebind.example.com": ["8.8.4.4"],
    }
    lookups: list[str] = []
    connected: list[tuple[str, int]] = []

    def fake_lookup(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        lookups.append(host)
        found = answers[host]
        if host == "rebind.example.com":
            answers[host] = ["127.0.0.1"]  # a second look-up would now give loopback
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in found]

    def fake_connect(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        connected.append(address)
        raise ConnectionRefusedError("not in tests")  # nothing leaves this machine

    monkeypatch.setattr(socket, "getaddrinfo", fake_lookup)
    monkeypatch.setattr(socket, "create_connection", fake_connect)
    with pytest.raises(WebhookError, match="refused: its host resolves to a private or reserved address"):
        WebhookChannel(f"https://mixed.example.com/{SECRET}").send(MESSAGE)
    assert connected == []
    with pytest.raises(WebhookError, match="ConnectionRefusedError"):
        WebhookChannel(f"https://rebind.example.com/{SECRET}").send(MESSAGE)
    assert lookups == ["mixed.example.com", "rebind.example.com"]  # one look-up per attempt
    assert connected == [("8.8.4.4", 443)]  # the checked address, not a fresh look-up


def test_an_allowed_loopback_receiver_gets_the_message() -> None:
    with receiver(ok) as r:
        WebhookChannel(f"http://localhost:{r.port}/services/{SECRET}", allow_loopback=True).send(MESSAGE)
        assert r.paths == [f"/services/{SECRET}"] and r.hosts == [f"localhost:{r.port}"]


def test_failures_are_retried_with_backoff_and_reported_once_by_kind() -> None:
    errors: list[str] = []
    with receiver(status(500, times=2)) as r:
        notifier = Notifier(
            [WebhookChannel(r.url(), allow_loopback=True)], errors.append, backoff_s=(0.05, 0.1), attempts=3
        )
        notifier(BLOCKED)
        assert notifier.flush()
        assert len(r.paths) == 3 and errors == []
    with receiver(status(404)) as r:
        notifier = Notifier([WebhookChannel(r.url(), allow_loopback=True)], errors.append, backoff_s=(0.05,))
        notifier(BLOCKED)
        assert notifier.flush()
        assert len(r.paths) == 1 and errors == ["notification via webhook failed: HTTP 404"]
    with receiver(status(503)) as r:
        errors.clear()
        notifier = Notifier([WebhookChannel(r.url(), allow_loopback=True)], errors.append, backoff_s=(0.05,))
        notifier(BLOCKED)
        assert notifier.flush()
        assert errors == ["notification via webhook failed after 3 attempts: HTTP 503"]
    assert not any(SECRET in e for e in errors)


def test_a_slow_receiver_never_holds_the_engine_or_the_lease() -> None:
    """The 196 s case: the event is queued and the engine moves on at once; the drain at exit is bounded."""
    errors: list[str] = []
    store = MemoryStore()
    with receiver(drip) as r:
        notifier = Notifier([WebhookChannel(r.url(), timeout_s=5, allow_loopback=True)], errors.append)
        assert store.acquire_lease("k", "engine-1", 900, AT)
        started = time.monotonic()
        notifier(BLOCKED)  # what the engine does while it holds the lease
        assert time.monotonic() - started < 0.1
        store.release_lease("k", "engine-1")
        assert store.acquire_lease("k", "engine-2", 900, AT + timedelta(seconds=1))
        started = time.monotonic()
        notifier.close(timeout_s=0.5)
        assert time.monotonic() - started < 1.5
    assert errors == ["1 notification(s) not delivered within the 0.5 s drain deadline at exit"]


def test_the_queue_is_bounded_and_overflow_is_reported() -> None:
    errors: list[str] = []
    release = threading.Event()

    class Stuck:
        name = "stuck"

        def send(self, message: Message) -> None:
            release.wait(5)

    notifier = Notifier([Stuck()], errors.append, queue_size=2)
    for _ in range(6):
        notifier(BLOCKED)
    release.set()
    notifier.close(timeout_s=5)
    assert any("dropped: more than 2 were waiting" in e for e in errors)


def test_the_delivery_thread_ends_when_idle_and_starts_again_for_the_next_message() -> None:
    """A dashboard builds a context (and a notifier) per request: no thread may outlive its work."""
    sent: list[str] = []
    seen = threading.Event()  # the first delivery waits until the test has seen the thread start

    class Quick:
        name = "quick"

        def send(self, message: Message) -> None:
            seen.wait(10)
            sent.append(message.subject)

    def threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "notify" and t.is_alive()}

    # Only this notifier's thread is watched: other tests' notifiers in this process end on their own.
    before = threads()
    notifier = Notifier([Quick()], idle_s=0.1)
    notifier(BLOCKED)
    mine = threads() - before
    seen.set()
    assert len(mine) == 1
    assert notifier.flush()
    deadline = time.monotonic() + 10
    while any(t.is_alive() for t in mine) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(t.is_alive() for t in mine)
    notifier(BLOCKED)
    notifier.close(timeout_s=5)
    assert len(sent) == 2
