"""Every AWS call ends in bounded time: a connect timeout, a deadline for the whole answer of each
attempt, and one for the whole call (every attempt and the waits between them); answers larger than a
cap are refused while they arrive.

botocore's ``read_timeout`` is per socket read, so an endpoint that drips its body one byte every 10 s
never trips it and ``stop`` hangs for good; a silent endpoint took 8 attempts x 30 s (274 s) to fail,
with nothing printed; and botocore reads any answer whole, however large, before anyone looks at it.

``bound(client)`` (applied to every client ``aws.clients`` builds) replaces the client's HTTP sender
with one that gives each attempt a budget for its complete answer, reading the body itself with a size
cap. The attempt runs on the calling thread and ``aws.watchdog`` shuts its socket down when the budget
is spent (where the watchdog cannot be installed, the attempt runs on a worker thread and the caller
waits at most the budget). A late attempt is abandoned and reported as a read timeout, which botocore
retries like any other (for calls that change a cluster, the no-blind-retry rule decides). A
``needs-retry`` handler stops the retries when another attempt could not finish before the call's
deadline, and says so.

The limits come from, in order: ``use()`` (the CLI's ``--aws-*`` options), the
``HYPERPOD_SCHEDULER_AWS_*`` environment variables (Lambda, cron), and the defaults below.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

import botocore.session
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ReadTimeoutError

from hyperpod_scheduler.aws import watchdog
from hyperpod_scheduler.errors import AwsError, UsageError
from hyperpod_scheduler.inputs.text import digits

C = TypeVar("C")
MiB = 1024 * 1024
_STARTED = "hyperpod_scheduler_call_started"
_MARK = "_hyperpod_scheduler_bounded"
_CHUNK = 64 * 1024
# botocore's standard and adaptive retry modes sleep at most min(2 ** (attempt - 1), 20) s between
# attempts (botocore.retries.standard): what the next attempt must leave room for.
_MAX_BACKOFF_S = 20.0


@dataclass(frozen=True)
class Deadlines:
    connect_s: float = 5.0  # to open the connection
    read_s: float = 30.0  # for the complete answer of one attempt, headers and body
    total_s: float = 120.0  # for the whole call: every attempt and the waits between them
    max_answer_mb: float = 16.0  # a larger answer is refused as it arrives

    @property
    def attempt_s(self) -> float:
        return self.connect_s + self.read_s

    @property
    def max_answer_bytes(self) -> int:
        return int(self.max_answer_mb * MiB)

    def describe(self) -> str:
        return (
            f"connect {self.connect_s:g} s, answer {self.read_s:g} s per attempt, {self.total_s:g} s per call, "
            f"answers up to {self.max_answer_mb:g} MiB"
        )


# What each limit is called on the command line and in the environment.
OPTIONS = {
    "connect_s": ("--aws-connect-timeout", "HYPERPOD_SCHEDULER_AWS_CONNECT_TIMEOUT"),
    "read_s": ("--aws-read-timeout", "HYPERPOD_SCHEDULER_AWS_READ_TIMEOUT"),
    "total_s": ("--aws-deadline", "HYPERPOD_SCHEDULER_AWS_DEADLINE"),
    "max_answer_mb": ("--aws-max-answer-mb", "HYPERPOD_SCHEDULER_AWS_MAX_ANSWER_MB"),
}
_HIGHEST = {"connect_s": 600.0, "read_s": 3600.0, "total_s": 6 * 3600.0, "max_answer_mb": 1024.0}
_override: Deadlines | None = None


def limit_value(name: str, text: str, where: str) -> float:
    """One limit from text, or ``UsageError`` naming where it came from (an option or a variable)."""
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{where}: {text!r} is not a number") from None
    if not (math.isfinite(value) and 0 < value <= _HIGHEST[name]):
        raise UsageError(f"{where}: {text!r} must be more than 0 and at most {_HIGHEST[name]:g}")
    return value


def from_env(environ: Mapping[str, str] | None = None) -> Deadlines:
    env = os.environ if environ is None else environ
    values = {}
    for f in fields(Deadlines):
        variable = OPTIONS[f.name][1]
        if env.get(variable, "").strip():
            values[f.name] = limit_value(f.name, env[variable].strip(), f"${variable}")
    return Deadlines(**values)


def use(deadlines: Deadlines | None) -> None:
    """Set the limits for clients built from now on in this process (None: back to the environment)."""
    global _override
    _override = deadlines


def current() -> Deadlines:
    return _override if _override is not None else from_env()


def with_options(base: Deadlines, given: Mapping[str, float]) -> Deadlines:
    return replace(base, **dict(given))


# ---- errors ------------------------------------------------------------------------------------------


class AnswerTimeout(ReadTimeoutError):
    """One attempt did not bring its complete answer in time (botocore retries it like a read timeout)."""

    fmt = "{operation}: no complete answer within {seconds:g} s (attempt {attempt}; read deadline {read:g} s)"


class DeadlineExceeded(AwsError):
    """The whole call ran out of time, or another attempt would not fit in what is left; nothing more
    is tried."""

    def __init__(
        self, operation: str, elapsed: float, attempts: int, total: float, last: str = "", *, early: bool = False
    ) -> None:
        fit = ", and another attempt would not fit in what is left" if early else ""
        said = f"; last: {last}" if last else ""
        super().__init__(
            f"{operation}: gave up after {attempts} attempt(s) in {elapsed:.0f} s (the call's deadline is "
            f"{total:g} s{fit}){said} (--aws-deadline or $HYPERPOD_SCHEDULER_AWS_DEADLINE)"
        )


class AnswerTooLarge(AwsError):
    def __init__(self, operation: str, limit_mb: float, declared: int | None = None) -> None:
        size = f" ({declared / MiB:.1f} MiB declared)" if declared is not None else ""
        super().__init__(
            f"{operation}: answer larger than {limit_mb:g} MiB{size}; refused unread "
            "(--aws-max-answer-mb or $HYPERPOD_SCHEDULER_AWS_MAX_ANSWER_MB)"
        )


# ---- the sender --------------------------------------------------------------------------------------


class _Buffered(io.BytesIO):
    """A complete body standing in for urllib3's response: what AWSResponse and StreamingBody read."""

    def stream(self, amt: int = _CHUNK, decode_content: bool | None = None) -> Iterator[bytes]:
        while chunk := self.read(amt):
            yield chunk

    def release_conn(self) -> None:
        return None


def _context(request: AWSPreparedRequest) -> Mapping[str, Any]:
    context = getattr(request, "context", None)  # botocore sets it; its type stubs do not know it
    return context if isinstance(context, Mapping) else {}


def _operation(request: AWSPreparedRequest) -> str:
    return str(_context(request).get("hyperpod_scheduler_operation") or "AWS call")


def _attempt(request: AWSPreparedRequest) -> int:
    retries = _context(request).get("retries") or {}
    return int(retries.get("attempt", 1)) if isinstance(retries, Mapping) else 1


def _shut(raw: Any) -> None:
    """Shut the socket under a urllib3 response, so a worker blocked reading it wakes up now."""
    connection = getattr(raw, "connection", None) or getattr(raw, "_connection", None)
    sock = getattr(connection, "sock", None)
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):  # already closed or half torn down: either way it is given up
        raw.close()


class _Workers:
    """Daemon threads that run attempts, kept for the next one (starting a thread per call cost more
    than the call on a loaded machine). A thread is added whenever none is idle, so an abandoned
    attempt never delays another; daemon, so one stuck on a dripping server never holds up exit."""

    def __init__(self) -> None:
        self._tasks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def run(self, task: Callable[[], None]) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1  # an idle thread takes it
            else:
                threading.Thread(target=self._serve, name="aws-attempt", daemon=True).start()
        self._tasks.put(task)

    def _serve(self) -> None:
        while True:
            task = self._tasks.get()
            try:
                task()
            finally:
                with self._lock:
                    self._idle += 1

    @property
    def busy(self) -> int:
        """Threads running an attempt now (an abandoned one counts until its socket gives up)."""
        alive = sum(1 for t in threading.enumerate() if t.name == "aws-attempt" and t.is_alive())
        return alive - self._idle


_WORKERS = _Workers()


class BoundedSender:
    """Stands in for a client's ``http_session``: the same ``send``, with a deadline and a size cap.

    ``watched`` (botocore's own urllib3 session, as ``aws.watchdog`` knows it): each attempt runs on the
    calling thread and the watchdog keeps its deadline. Otherwise each attempt runs on a worker thread
    and the calling thread waits at most its budget.
    """

    def __init__(self, inner: Any, deadlines: Deadlines, *, watched: bool | None = None) -> None:
        self._inner = inner
        self.deadlines = deadlines
        self.watched = watchdog.install(inner) if watched is None else watched

    def __getattr__(self, name: str) -> Any:  # close(), proxies and the rest are the real sender's
        return getattr(self._inner, name)

    def send(self, request: AWSPreparedRequest) -> AWSResponse:
        operation = _operation(request)
        started = _context(request).get(_STARTED)
        now = time.monotonic()
        budget = self.deadlines.attempt_s
        if isinstance(started, float):
            remaining = self.deadlines.total_s - (now - started)
            if remaining <= 0:
                raise DeadlineExceeded(operation, now - started, _attempt(request) - 1, self.deadlines.total_s)
            budget = min(budget, remaining)
        if self.watched:
            return self._send_watched(request, operation, started, budget)
        outcome: dict[str, Any] = {}
        # A bare lock, held until the worker is done: waiting on it is one C call, where an Event's wait
        # builds a Condition waiter in Python each time (a tenth of a millisecond per call, contended).
        done = threading.Lock()
        done.acquire()
        cancelled = threading.Event()
        _WORKERS.run(lambda: self._work(request, outcome, done, cancelled))
        if not done.acquire(timeout=budget):
            cancelled.set()
            raw = outcome.get("raw")
            if raw is not None:
                _shut(raw)
            raise self._late(request, operation, started, budget)
        if "error" in outcome:
            raise outcome["error"]
        response: AWSResponse = outcome["response"]
        return response

    def _late(self, request: AWSPreparedRequest, operation: str, started: Any, budget: float) -> Exception:
        """The error for an attempt that ran out of its budget."""
        if isinstance(started, float) and budget < self.deadlines.attempt_s:
            return DeadlineExceeded(
                operation,
                time.monotonic() - started,
                _attempt(request),
                self.deadlines.total_s,
                f"no complete answer in the {budget:.0f} s that were left",
            )
        return AnswerTimeout(
            endpoint_url=request.url,
            operation=operation,
            seconds=budget,
            attempt=_attempt(request),
            read=self.deadlines.read_s,
        )

    def _send_watched(self, request: AWSPreparedRequest, operation: str, started: Any, budget: float) -> AWSResponse:
        streamed = copy.copy(request)
        streamed.stream_output = True  # returned at the headers: the body is read below, counted
        watch = watchdog.WATCHDOG.start(budget)
        try:
            try:
                response = self._inner.send(streamed)
                body = self._read(response, operation, lambda: watch.fired)
            except AnswerTooLarge:
                raise  # refused for its size, whenever the deadline passed
            except Exception:
                if watch.fired:  # the watchdog shut the socket: whatever broke, it broke for lateness
                    raise self._late(request, operation, started, budget) from None
                raise
            if watch.fired and not _whole(response, body):  # shut between two reads: cut short
                _shut(response.raw)
                raise self._late(request, operation, started, budget)
        finally:
            watchdog.WATCHDOG.end(watch)
        return AWSResponse(response.url, response.status_code, response.headers, _Buffered(body))

    def _work(
        self,
        request: AWSPreparedRequest,
        outcome: dict[str, Any],
        done: threading.Lock,
        cancelled: threading.Event,
    ) -> None:
        try:
            # botocore's sender reads every non-streaming body whole; asked for a stream, it returns at the
            # headers and the body is read here, counted.
            streamed = copy.copy(request)
            streamed.stream_output = True
            response = self._inner.send(streamed)
            outcome["raw"] = response.raw
            if cancelled.is_set():
                _shut(response.raw)
                return
            body = self._read(response, _operation(request), cancelled.is_set)
            outcome["response"] = AWSResponse(response.url, response.status_code, response.headers, _Buffered(body))
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            done.release()

    def _read(self, response: AWSResponse, operation: str, late: Callable[[], bool]) -> bytes:
        """The whole body, counted; empty if ``late()`` says the attempt was given up meanwhile."""
        limit = self.deadlines.max_answer_bytes
        declared = _declared_length(response)
        if declared is not None and declared > limit:
            _shut(response.raw)
            raise AnswerTooLarge(operation, self.deadlines.max_answer_mb, declared)
        chunks: list[bytes] = []
        size = 0
        for chunk in response.raw.stream(_CHUNK, decode_content=False):
            size += len(chunk)
            if size > limit:
                _shut(response.raw)
                raise AnswerTooLarge(operation, self.deadlines.max_answer_mb)
            if late():
                _shut(response.raw)
                return b""
            chunks.append(chunk)
        return b"".join(chunks)


def _whole(response: AWSResponse, body: bytes) -> bool:
    """The body is as long as its Content-Length said: complete, even if the deadline passed as it ended
    (an UpdateCluster answered in full is not turned into one whose outcome is unknown). Without a
    Content-Length a shut socket looks like the end of the body, so it cannot be told."""
    return _declared_length(response) == len(body)


def _declared_length(response: AWSResponse) -> int | None:
    declared = response.headers.get("content-length")
    return int(declared) if declared is not None and digits(declared) else None


# ---- the hooks ---------------------------------------------------------------------------------------


def _before_call(model: Any, context: dict[str, Any], **_: Any) -> None:
    context.setdefault(_STARTED, time.monotonic())
    context["hyperpod_scheduler_operation"] = getattr(model, "name", "AWS call")


_THROTTLES = ("Throttl", "TooManyRequests", "RequestLimitExceeded", "SlowDown", "ProvisionedThroughputExceeded")


def _retryable(response: Any) -> bool:
    """A 5xx or a throttle: an answer botocore would try again."""
    status = getattr(response[0], "status_code", 200)
    parsed = response[1] if len(response) > 1 and isinstance(response[1], Mapping) else {}
    code = str((parsed.get("Error") or {}).get("Code", ""))
    return status >= 500 or status == 429 or any(t in code for t in _THROTTLES)


def _retry_handler(deadlines: Deadlines) -> Any:
    def needs_retry(
        attempts: int,
        operation: Any,
        request_dict: Mapping[str, Any],
        response: Any = None,
        caught_exception: BaseException | None = None,
        **_: Any,
    ) -> bool | None:
        failed = caught_exception is not None or (response is not None and _retryable(response))
        if not failed or isinstance(caught_exception, DeadlineExceeded | AnswerTooLarge):
            return None
        started = (request_dict.get("context") or {}).get(_STARTED)
        if not isinstance(started, float):
            return None
        elapsed = time.monotonic() - started
        # The longest wait botocore may choose before the next attempt, and a moment for that attempt.
        room = min(2.0 ** max(attempts - 1, 0), _MAX_BACKOFF_S) + 1.0
        if elapsed + room < deadlines.total_s:
            return None
        last = str(caught_exception) if caught_exception is not None else f"HTTP {response[0].status_code}"
        raise DeadlineExceeded(
            getattr(operation, "name", "AWS call"), elapsed, attempts, deadlines.total_s, last, early=True
        )

    return needs_retry


def bound(client: C, deadlines: Deadlines | None = None) -> C:
    """Give ``client`` the deadlines and the answer cap (``current()`` unless given); once per client."""
    meta = getattr(client, "meta", None)
    endpoint = getattr(client, "_endpoint", None)
    if meta is None or endpoint is None or getattr(meta, _MARK, False):
        return client  # a stand-in without botocore's machinery (a test fake), or already bound
    limits = deadlines or current()
    endpoint.http_session = BoundedSender(endpoint.http_session, limits)
    service = meta.service_model.service_id.hyphenize()
    meta.events.register_first(f"before-call.{service}", _before_call, unique_id="hyperpod-scheduler-deadline-start")
    meta.events.register_first(
        f"needs-retry.{service}", _retry_handler(limits), unique_id="hyperpod-scheduler-deadline-retry"
    )
    setattr(meta, _MARK, True)
    return client


def client_config(deadlines: Deadlines | None = None) -> Any:
    """The botocore Config part the limits set: the connect timeout, and a per-read timeout no longer
    than the attempt's deadline (the deadline itself is kept by the sender)."""
    from botocore.config import Config

    limits = deadlines or current()
    return Config(connect_timeout=limits.connect_s, read_timeout=limits.read_s)


class BoundedBotocoreSession(botocore.session.Session):
    """A botocore session whose every client is bound (and has its answers checked): what
    ``aws.clients.session`` hands to boto3, so ``session().client("fsx")`` is covered like the rest."""

    def create_client(self, *args: Any, **kwargs: Any) -> Any:
        from hyperpod_scheduler.aws import answers  # imported here: answers is the other edge of the client

        limits = current()
        given = kwargs.get("config")
        # The connect and per-read timeouts follow the limits, whatever config the caller passed.
        kwargs["config"] = given.merge(client_config(limits)) if given is not None else client_config(limits)
        return answers.watch(bound(super().create_client(*args, **kwargs), limits))
