"""Every AWS call ends in bounded time and refuses oversized answers (aws/deadlines.py), against loopback
endpoints that drip, stay silent or send too much; and a well-behaved endpoint still works. Each runs
both ways the sender keeps a deadline: on the calling thread with the watchdog (aws/watchdog.py, what
production clients use), and on worker threads (where the watchdog cannot be installed)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from urllib3 import HTTPHeaderDict

from hyperpod_scheduler.aws import deadlines, watchdog
from hyperpod_scheduler.aws.clients import s3_client, sagemaker_client, session
from hyperpod_scheduler.aws.deadlines import AnswerTooLarge, BoundedSender, DeadlineExceeded, Deadlines
from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.errors import UsageError
from tests.aws.bounded_calls import CREDENTIALS, bounded_client, raised_within, workers_gone
from tests.aws.bounded_calls import credentials as credentials  # the autouse fixture, for this module
from tests.aws.slow_endpoints import drip, drip_headers, endpoint, huge, silent
from tests.engine.conftest import three_tier_request
from tests.reliability.cli_inproc import cli

QUICK = Deadlines(connect_s=1, read_s=1, total_s=6, max_answer_mb=1)


@pytest.fixture(params=["watched", "threads"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _client(url: str, limits: Deadlines = QUICK, mode: str = "watched") -> object:
    return bounded_client(url, limits, mode)


@pytest.mark.parametrize(
    "behaviour", [drip(every_s=0.2), drip_headers(every_s=0.2), silent()], ids=["drip", "drip-headers", "silent"]
)
def test_a_slow_endpoint_fails_at_the_deadline_with_a_line_that_says_so(behaviour: object, mode: str) -> None:
    with endpoint(behaviour) as slow:  # type: ignore[arg-type]
        client = _client(slow.url, mode=mode)
        started = time.monotonic()
        raised = raised_within(QUICK.total_s + 10, lambda: client.describe_cluster(ClusterName="c1"))  # type: ignore[attr-defined]
        elapsed = time.monotonic() - started
        assert slow.connections >= 2  # a late attempt is retried like a read timeout, within the deadline
    assert isinstance(raised, DeadlineExceeded), raised
    said = str(raised)
    assert said.startswith("DescribeCluster: gave up after") and "(the call's deadline is 6 s" in said
    assert "--aws-deadline" in said and "\n" not in said
    assert elapsed < QUICK.total_s + 1.5  # not 8 attempts x 30 s, and never for good
    assert workers_gone()  # abandoned attempts do not linger


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_an_oversized_answer_is_refused_as_it_arrives_and_not_retried(declared: bool, mode: str) -> None:
    with endpoint(huge(45 * 1024 * 1024, declared=declared)) as big:
        client = _client(big.url, mode=mode)
        started = time.monotonic()
        with pytest.raises(AnswerTooLarge, match=r"DescribeCluster: answer larger than 1 MiB") as caught:
            client.describe_cluster(ClusterName="c1")  # type: ignore[attr-defined]
        assert time.monotonic() - started < 3
        assert big.connections == 1
    assert ("45.0 MiB declared" in str(caught.value)) is declared
    assert workers_gone()


def test_a_well_behaved_endpoint_is_answered_through_the_bounded_sender(emu: Emulator, mode: str) -> None:
    client = _client(emu.endpoint, Deadlines(), mode)
    client.create_cluster(**three_tier_request())  # type: ignore[attr-defined]
    answer = client.describe_cluster(ClusterName="c1")  # type: ignore[attr-defined]
    assert answer["ClusterName"] == "c1" and [g["InstanceGroupName"] for g in answer["InstanceGroups"]] == [
        "controller",
        "dev",
        "train",
    ]
    assert isinstance(client._endpoint.http_session, BoundedSender)  # type: ignore[attr-defined]
    assert workers_gone()


def test_calls_from_many_threads_at_once_are_answered_on_their_own_threads(emu: Emulator) -> None:
    client = _client(emu.endpoint, Deadlines())
    client.create_cluster(**three_tier_request())  # type: ignore[attr-defined]
    before = {t.name for t in threading.enumerate()}
    answers: list[str] = []

    def call() -> None:
        for _ in range(5):
            answers.append(client.describe_cluster(ClusterName="c1")["ClusterName"])  # type: ignore[attr-defined]

    threads = [threading.Thread(target=call) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert answers == ["c1"] * 30
    assert "aws-attempt" not in {t.name for t in threading.enumerate()} - before  # no thread hand-over
    assert workers_gone()


def test_a_late_deadline_never_shuts_the_socket_the_next_attempt_uses() -> None:
    """An attempt's connection goes back to the pool as its body ends, a moment before the attempt is
    over: if its deadline passed in that moment, the next attempt on the connection must not lose it."""
    ours, theirs = socket.socketpair()

    class Conn:
        sock = ours

    conn = Conn()
    first = watchdog.WATCHDOG.start(0.2)
    watchdog.WATCHDOG.carries(conn)
    taken = threading.Event()
    release = threading.Event()

    def next_attempt() -> None:
        second = watchdog.WATCHDOG.start(30)
        watchdog.WATCHDOG.carries(conn)  # another thread takes the connection from the pool
        taken.set()
        release.wait(10)
        watchdog.WATCHDOG.end(second)

    other = threading.Thread(target=next_attempt)
    other.start()
    try:
        assert taken.wait(10)
        end = time.monotonic() + 10
        while not first.fired and time.monotonic() < end:
            time.sleep(0.02)
        assert first.fired  # the first attempt's deadline did pass
        ours.sendall(b"still open")
        assert theirs.recv(16) == b"still open"  # and the socket the second attempt uses was left alone
    finally:
        watchdog.WATCHDOG.end(first)
        release.set()
        other.join(10)
        ours.close()
        theirs.close()


def test_a_deadline_shuts_the_socket_of_its_own_attempt() -> None:
    ours, theirs = socket.socketpair()

    class Conn:
        sock = ours

    watch = watchdog.WATCHDOG.start(0.2)
    try:
        watchdog.WATCHDOG.carries(Conn())
        started = time.monotonic()
        assert ours.recv(16) == b""  # blocked until the watchdog shut it down
        assert watch.fired and time.monotonic() - started < 5
    finally:
        watchdog.WATCHDOG.end(watch)
        ours.close()
        theirs.close()


def test_every_client_the_product_builds_is_bound() -> None:
    for client in (
        sagemaker_client(region="us-east-1"),
        s3_client(region="us-east-1"),
        session(region="us-east-1").client("fsx"),
        session(region="us-east-1").client("pricing"),
    ):
        sender = client._endpoint.http_session
        assert isinstance(sender, BoundedSender), client.meta.service_model.service_name
        assert sender.watched, client.meta.service_model.service_name  # with the installed botocore
        assert client.meta.config.connect_timeout == 5 and client.meta.config.read_timeout == 30


def test_limits_come_from_the_environment_and_bad_ones_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPERPOD_SCHEDULER_AWS_DEADLINE", "42")
    monkeypatch.setenv("HYPERPOD_SCHEDULER_AWS_CONNECT_TIMEOUT", "2")
    assert deadlines.current() == Deadlines(connect_s=2, total_s=42)
    assert sagemaker_client(region="us-east-1").meta.config.connect_timeout == 2
    for bad in ("abc", "nan", "-1", "inf", "0"):
        monkeypatch.setenv("HYPERPOD_SCHEDULER_AWS_DEADLINE", bad)
        with pytest.raises(UsageError, match=r"\$HYPERPOD_SCHEDULER_AWS_DEADLINE: "):
            deadlines.current()


def test_stop_against_a_dripping_endpoint_ends_with_one_line(tmp_path: object) -> None:
    with endpoint(drip(every_s=0.2)) as slow:
        started = time.monotonic()
        ran = cli(
            "stop", "c1", "--region", "us-east-1", "--state", "memory:",
            "--aws-deadline", "3", "--aws-read-timeout=1",
            env={**CREDENTIALS, "AWS_ENDPOINT_URL_SAGEMAKER": slow.url},
        )  # fmt: skip
        elapsed = time.monotonic() - started
    line = ran.one_error_line()
    assert ran.code == 1 and "DescribeCluster: gave up after" in line and "(the call's deadline is 3 s" in line
    assert elapsed < 6


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--aws-deadline", "soon"), "--aws-deadline: 'soon' is not a number"),
        (("--aws-read-timeout=-3",), "--aws-read-timeout: '-3' must be more than 0"),
        (("--aws-max-answer-mb",), "--aws-max-answer-mb: needs a value"),
    ],
)
def test_bad_limits_on_the_command_line_are_one_line(args: tuple[str, ...], said: str) -> None:
    assert said in cli("status", "--state", "memory:", *args).one_error_line()


class _EndsAsTheDeadlinePasses:
    """botocore's sender, standing in: an answer whose deadline passes the moment its body has been read."""

    def __init__(self, body: bytes, declared: bool) -> None:
        self.body = body
        self.declared = declared

    def send(self, request: AWSPreparedRequest) -> AWSResponse:
        body = self.body

        class Raw:
            def stream(self, amt: int = 0, decode_content: bool = False) -> Iterator[bytes]:
                yield body
                watch = watchdog._current.watch
                watch.fired = True  # what the watchdog does when the deadline passes

            def close(self) -> None:
                return None

        headers = HTTPHeaderDict({"content-length": str(len(body))} if self.declared else {})
        return AWSResponse(request.url, 200, headers, Raw())


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "close-delimited"])
def test_an_answer_read_whole_as_its_deadline_passes_is_kept_when_its_length_proves_it(declared: bool) -> None:
    """An UpdateCluster answered in full must not become one whose outcome is unknown because the deadline
    passed as its last byte arrived; without a Content-Length nothing proves the body whole."""
    sender = BoundedSender(_EndsAsTheDeadlinePasses(b'{"ClusterArn": "arn"}', declared), QUICK, watched=True)
    request = AWSPreparedRequest("POST", "http://127.0.0.1:1", {}, b"{}", stream_output=False)
    if declared:
        assert sender.send(request).content == b'{"ClusterArn": "arn"}'
    else:
        with pytest.raises(deadlines.AnswerTimeout):
            sender.send(request)
    assert watchdog.WATCHDOG.watched == 0
