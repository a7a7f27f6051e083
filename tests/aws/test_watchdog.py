"""Attacks on the call-deadline watchdog (aws/watchdog.py): each window a deadline can fire in, a
connection shared by attempts on other threads, TLS, proxies, fork, and what it costs in memory and
wake-ups over many quick calls."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from hyperpod_scheduler.aws import deadlines, watchdog
from hyperpod_scheduler.aws.deadlines import BoundedSender, DeadlineExceeded, Deadlines
from tests.aws.bounded_calls import bounded_client, raised_within, workers_gone
from tests.aws.bounded_calls import credentials as credentials  # the autouse fixture, for this module
from tests.aws.slow_endpoints import Behaviour, Endpoint, _read_request, drip, endpoint, silent
from tests.engine.conftest import three_tier_request

# An attempt gets one second, the call 1.5: another attempt would not fit, so one attempt decides.
TIGHT = Deadlines(connect_s=0.5, read_s=0.5, total_s=1.5, max_answer_mb=1)


def _client(url: str, limits: Deadlines = TIGHT) -> object:
    return bounded_client(url, limits)


def drip_tls_handshake(every_s: float = 0.1) -> Behaviour:
    """Reads the ClientHello, then answers with the header of a 16 KiB handshake record and drips its
    body a byte at a time: every read the TLS handshake makes is answered within any per-read timeout,
    and the handshake never ends."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        conn.sendall(b"\x16\x03\x03\x40\x00")
        while not stop.wait(every_s):
            conn.sendall(b"\x00")

    return behave


def test_a_tls_handshake_dripped_a_byte_at_a_time_ends_at_the_call_deadline() -> None:
    with endpoint(drip_tls_handshake()) as slow:
        client = _client(slow.url.replace("http://", "https://"))
        started = time.monotonic()
        raised = raised_within(TIGHT.total_s + 8, lambda: client.describe_cluster(ClusterName="c1"))  # type: ignore[attr-defined]
        elapsed = time.monotonic() - started
    assert isinstance(raised, DeadlineExceeded), raised
    assert "DescribeCluster: gave up after" in str(raised)
    assert elapsed < TIGHT.total_s + 1.0
    assert workers_gone()


# ---- cost: memory and wake-ups over many quick calls --------------------------------------------------


def test_a_hundred_thousand_quick_calls_leave_the_watchdog_heap_small() -> None:
    """Nearly every attempt ends long before its deadline; an ended one must not stay queued until
    that deadline (with an hour's read budget, a busy process would hold every call of the hour)."""
    dog = watchdog.Watchdog()
    for _ in range(100_000):
        dog.end(dog.start(35.0))
    assert len(dog._heap) < 1_000
    assert dog.watched == 0
    live = [dog.start(35.0) for _ in range(300)]  # attempts still running are never dropped
    for _ in range(5_000):
        dog.end(dog.start(35.0))
    assert dog.watched == 300 and all(w.queued for w in live)
    for w in live:
        dog.end(w)


def _counting_watchdog() -> tuple[watchdog.Watchdog, list[int]]:
    dog = watchdog.Watchdog()
    wakes = [0]

    class Counting(threading.Condition):
        def wait(self, timeout: float | None = None) -> bool:
            wakes[0] += 1
            return super().wait(timeout)

    dog._cond = Counting(threading.Lock())
    return dog, wakes


def test_the_watchdog_does_not_wake_once_per_call() -> None:
    """No deadline is due (an hour each, all ended), so the watchdog has nothing to do: it looks once,
    when it starts, however many calls come and go (the pruning of ended ones included)."""
    dog, wakes = _counting_watchdog()
    for _ in range(20_000):
        dog.end(dog.start(3600.0))
    assert wakes[0] == 1, wakes


def test_the_watchdog_does_not_wake_once_per_call_when_it_runs_between_calls() -> None:
    """What a loaded machine does: the watchdog thread gets the processor between one call's end and
    the next one's start. Taking the ended attempt off then left an empty heap, a wait for a notify,
    and a notify (a thread switch) from the next call, call after call."""
    dog, wakes = _counting_watchdog()
    for _ in range(300):
        dog.end(dog.start(3600.0))
        time.sleep(0.001)  # hands the processor over: the watchdog runs now if it has been woken
    assert wakes[0] == 1, wakes


# ---- a connection shared by attempts -----------------------------------------------------------------


def keep_alive(answer: bytes = b"{}") -> Behaviour:
    """Answers every request on a connection at once, and keeps the connection open for the next."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set() and _read_request(conn):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\n"
                         + f"Content-Length: {len(answer)}\r\n\r\n".encode() + answer)  # fmt: skip

    return behave


def _until(condition: object, within_s: float = 10.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_a_deadline_passing_after_the_body_ended_leaves_the_pooled_connection_to_its_next_user() -> None:
    """The body ends, the connection goes back to the pool, and the attempt is not yet marked over when
    its deadline passes; meanwhile another thread has taken the connection but not yet written to it.
    That thread's request must go out on a whole connection."""
    with endpoint(keep_alive()) as server:
        port = int(server.url.rsplit(":", 1)[1])
        pool = watchdog.WatchedHTTPConnectionPool("127.0.0.1", port, maxsize=1)
        first = watchdog.WATCHDOG.start(0.3)
        try:
            answer = pool.urlopen("GET", "/", preload_content=False, retries=False)
            assert answer.read() == b"{}" and pool.pool is not None and pool.pool.qsize() == 1
            outcome: list[object] = []

            def next_call() -> None:
                second = watchdog.WATCHDOG.start(30)
                try:
                    conn = pool._get_conn()  # taken from the pool before the first deadline passes
                    assert _until(lambda: first.fired)
                    outcome.append(pool._make_request(conn, "GET", "/").data)
                except Exception as exc:
                    outcome.append(exc)
                finally:
                    watchdog.WATCHDOG.end(second)

            other = threading.Thread(target=next_call)
            other.start()
            other.join(15)
        finally:
            watchdog.WATCHDOG.end(first)
        assert outcome == [b"{}"]
        assert server.connections == 1


# ---- opening the connection ---------------------------------------------------------------------------


@pytest.fixture
def full_backlog() -> Iterator[str]:
    """A listener whose accept queue is full and never emptied: the kernel drops each new SYN, so a
    connect to it hangs until its timeout (a black hole without leaving the machine)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    filling: list[socket.socket] = []
    try:
        for _ in range(16):
            probe = socket.socket()
            probe.settimeout(0.3)
            filling.append(probe)
            try:
                probe.connect(listener.getsockname())
            except TimeoutError:
                break
        else:
            pytest.skip("this kernel accepts every connect: no black hole to test with")
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        for s in filling:
            s.close()
        listener.close()


@pytest.mark.parametrize("where", ["tcp-connect", "tls-handshake"])
def test_opening_the_connection_is_cut_short_at_the_call_deadline(where: str, request: pytest.FixtureRequest) -> None:
    """The connect timeout (4 s) is longer than the whole call may take (1 s): the attempt's deadline
    wins, whether the connect itself hangs or the TLS handshake after it."""
    limits = Deadlines(connect_s=4, read_s=0.5, total_s=1.0)
    with endpoint(silent()) as quiet:
        url = (
            request.getfixturevalue("full_backlog") if where == "tcp-connect" else quiet.url.replace("http:", "https:")
        )
        client = _client(url, limits)
        started = time.monotonic()
        raised = raised_within(10, lambda: client.describe_cluster(ClusterName="c1"))  # type: ignore[attr-defined]
        elapsed = time.monotonic() - started
    assert isinstance(raised, DeadlineExceeded), raised
    assert elapsed < limits.total_s + 1.5, elapsed


# ---- TLS, and the next call after a broken one --------------------------------------------------------

ARN = b'{"ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefghijkl"}'


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    where = tmp_path_factory.mktemp("tls")
    cert, key = str(where / "cert.pem"), str(where / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def over_tls(certificate: tuple[str, str], behave: Behaviour) -> Behaviour:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)

    def wrapped(conn: socket.socket, stop: threading.Event) -> None:
        with context.wrap_socket(conn, server_side=True) as tls:
            behave(tls, stop)

    return wrapped


def first_connection_then(first: Behaviour, later: Behaviour) -> Callable[[Endpoint], Behaviour]:
    def bind(server: Endpoint) -> Behaviour:
        def behave(conn: socket.socket, stop: threading.Event) -> None:
            (first if server.connections == 1 else later)(conn, stop)

        return behave

    return bind


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_after_a_late_answer_the_next_update_cluster_goes_out_on_a_whole_connection(
    scheme: str, certificate: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first call's answer drips past its deadline and the watchdog shuts that socket: the shut
    connection must not go back to the pool and fail the UpdateCluster after it, which is never
    retried blind."""
    monkeypatch.setenv("AWS_CA_BUNDLE", certificate[0])
    server = Endpoint(lambda conn, stop: None)
    choose = first_connection_then(drip(every_s=0.1), keep_alive(ARN))(server)
    server.behave = over_tls(certificate, choose) if scheme == "https" else choose
    try:
        client = _client(server.url.replace("http:", f"{scheme}:"), Deadlines(connect_s=1, read_s=0.5, total_s=1.5))
        raised = raised_within(10, lambda: client.describe_cluster(ClusterName="c1"))  # type: ignore[attr-defined]
        assert isinstance(raised, DeadlineExceeded), raised
        answer = client.update_cluster(ClusterName="c1", InstanceGroups=three_tier_request()["InstanceGroups"])  # type: ignore[attr-defined]
        assert answer["ClusterArn"].endswith("/abcdefghijkl")
        assert answer["ResponseMetadata"]["RetryAttempts"] == 0
        assert server.connections == 2
    finally:
        server.close()


def test_a_silent_tls_endpoint_ends_at_the_deadline(
    certificate: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_CA_BUNDLE", certificate[0])
    with endpoint(over_tls(certificate, silent())) as quiet:
        client = _client(quiet.url.replace("http:", "https:"))
        started = time.monotonic()
        raised = raised_within(10, lambda: client.describe_cluster(ClusterName="c1"))  # type: ignore[attr-defined]
        elapsed = time.monotonic() - started
    assert isinstance(raised, DeadlineExceeded), raised
    assert elapsed < TIGHT.total_s + 1.0


# ---- fork, and the clients the watchdog cannot watch --------------------------------------------------


def test_a_forked_child_keeps_its_deadlines_while_the_parent_had_an_attempt_in_flight() -> None:
    with endpoint(silent()) as quiet:
        client = _client(quiet.url)
        in_flight = threading.Thread(target=lambda: raised_within(10, lambda: client.describe_cluster(ClusterName="p")))  # type: ignore[attr-defined]
        in_flight.start()
        assert _until(lambda: watchdog.WATCHDOG.watched == 1)  # the parent's watchdog holds one attempt
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # the child: only the forking thread; the watchdog must start its own
            code = 1
            try:
                started = time.monotonic()
                try:
                    client.describe_cluster(ClusterName="c1")  # type: ignore[attr-defined]
                except DeadlineExceeded:
                    code = 0 if time.monotonic() - started < TIGHT.total_s + 1.0 else 2
            finally:
                os.write(write, bytes([code]))
                os._exit(code)
        os.close(write)
        try:
            assert _until(lambda: os.waitpid(child, os.WNOHANG)[0] == child), "the child's call never ended"
            assert os.read(read, 1) == b"\x00"
        finally:
            os.close(read)
            with contextlib.suppress(ChildProcessError, ProcessLookupError):
                os.kill(child, 9)
                os.waitpid(child, 0)
        in_flight.join(10)


def answer_once_then_silent(answer: bytes = ARN) -> Behaviour:
    """Answers the first request on a connection, then reads the next and says nothing."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        _read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\n"
                     + f"Content-Length: {len(answer)}\r\n\r\n".encode() + answer)  # fmt: skip
        _read_request(conn)
        stop.wait(600)

    return behave


def test_a_client_used_before_it_was_bound_keeps_its_deadlines_on_worker_threads() -> None:
    import botocore.session

    with endpoint(answer_once_then_silent()) as server:
        raw = botocore.session.get_session().create_client(
            "sagemaker", region_name="us-east-1", endpoint_url=server.url
        )
        raw.update_cluster(
            ClusterName="c1", InstanceGroups=three_tier_request()["InstanceGroups"]
        )  # opens a pooled connection
        client = deadlines.bound(raw, TIGHT)
        sender = client._endpoint.http_session
        assert isinstance(sender, BoundedSender) and not sender.watched  # its pool already has the plain classes
        raised = raised_within(10, lambda: client.describe_cluster(ClusterName="c1"))
    assert isinstance(raised, DeadlineExceeded), raised
    assert workers_gone()


def test_a_client_whose_http_session_is_not_botocores_keeps_its_deadlines_on_worker_threads() -> None:
    import botocore.session

    class Wrapped:  # what a tracing library might put in between
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def send(self, request: object) -> object:
            return self.inner.send(request)  # type: ignore[attr-defined]

    with endpoint(silent()) as quiet:
        raw = botocore.session.get_session().create_client("sagemaker", region_name="us-east-1", endpoint_url=quiet.url)
        raw._endpoint.http_session = Wrapped(raw._endpoint.http_session)
        client = deadlines.bound(raw, TIGHT)
        assert not client._endpoint.http_session.watched
        started = time.monotonic()
        raised = raised_within(10, lambda: client.describe_cluster(ClusterName="c1"))
        elapsed = time.monotonic() - started
    assert isinstance(raised, DeadlineExceeded), raised
    assert elapsed < TIGHT.total_s + 1.0
    assert workers_gone()


def test_eight_threads_on_a_client_with_two_pooled_connections_are_all_answered() -> None:
    from botocore.config import Config

    from hyperpod_scheduler.aws.clients import session

    deadlines.use(Deadlines())
    try:
        with endpoint(keep_alive(ARN)) as server:
            client = session(region="us-east-1").client(
                "sagemaker", endpoint_url=server.url, config=Config(max_pool_connections=2)
            )
            assert client._endpoint.http_session.watched
            answers: list[str] = []
            groups = three_tier_request()["InstanceGroups"]

            def calls() -> None:
                for _ in range(25):
                    answers.append(client.update_cluster(ClusterName="c1", InstanceGroups=groups)["ClusterArn"])

            threads = [threading.Thread(target=calls) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
    finally:
        deadlines.use(None)
    assert len(answers) == 200 and len(set(answers)) == 1
    assert watchdog.WATCHDOG.watched == 0


def test_a_proxy_that_drips_its_connect_answer_ends_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTPS through $HTTPS_PROXY: the proxy's answer to CONNECT arrives a byte at a time."""

    def dripping_proxy(conn: socket.socket, stop: threading.Event) -> None:
        assert _read_request(conn).startswith(b"CONNECT ")
        for byte in b"HTTP/1.1 200 Connection established\r\n" + b"X-Pad: a\r\n" * 100:
            if stop.wait(0.05):
                return
            conn.sendall(bytes([byte]))

    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    with endpoint(dripping_proxy) as proxy, endpoint(silent()) as target:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        client = _client(target.url.replace("http:", "https:"))
        started = time.monotonic()
        raised = raised_within(10, lambda: client.describe_cluster(ClusterName="c1"))  # type: ignore[attr-defined]
        elapsed = time.monotonic() - started
        assert proxy.connections >= 1 and target.connections == 0  # it did go through the proxy
    assert isinstance(raised, DeadlineExceeded), raised
    assert elapsed < TIGHT.total_s + 1.0
