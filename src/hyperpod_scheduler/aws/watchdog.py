"""One thread that keeps every attempt's deadline, so an attempt runs on the thread that made the call.

Handing each attempt to a worker thread and waiting for it (what ``aws.deadlines`` did first, and still
does where this cannot be installed) cost two thread switches per call: on a busy 2-core machine, a
third of a millisecond and more per call, most of what the deadlines cost a tick. Here the calling
thread sends and reads as botocore would, and a single watchdog thread shuts the attempt's socket
down when its deadline passes, which wakes the caller from whatever read it is blocked in.

The watchdog learns an attempt's socket from the HTTP connection the attempt uses:
``install(http_session)`` gives botocore's urllib3 session connection classes that, on the calling
thread, tell the attempt watched there which connection carries it (on connect, request and
response). Installing needs two attributes of botocore's ``URLLib3Session`` that are not public API;
when they are not as expected, ``install`` says no and the sender keeps its worker threads.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import os
import socket
import threading
import time
from typing import Any

from botocore.awsrequest import (
    AWSHTTPConnection,
    AWSHTTPConnectionPool,
    AWSHTTPSConnection,
    AWSHTTPSConnectionPool,
)


class Expired(TimeoutError):
    """Raised on the calling thread when its attempt's deadline passed before a socket could be shut."""


class Watch:
    """One attempt's deadline. ``fired``: the deadline passed while the attempt was still running."""

    __slots__ = ("conn", "deadline", "fired", "over", "queued")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.conn: Any = None  # the connection carrying the attempt, once it has one
        self.fired = False
        self.over = False
        self.queued = True  # still in the watchdog's heap


_current = threading.local()  # the Watch of the attempt running on this thread, if any


class Watchdog:
    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Watch]] = []
        self._order = itertools.count()
        # When the watchdog will next look. A new deadline later than that (nearly every one: budgets
        # are equal and time moves on) is registered without waking it: no thread switch per call.
        self._wake_at = math.inf
        self._thread: threading.Thread | None = None
        # Attempts that are over but still in the heap. Nearly every attempt ends long before its
        # deadline, and the watchdog only looks at the heap's top when it wakes (about once a budget):
        # without pruning, every quick call in the last budget's worth of seconds would stay queued
        # (100,000 quick calls: 17 MiB, and read budgets may be an hour).
        self._ended = 0

    def start(self, budget_s: float) -> Watch:
        """Watch an attempt on this thread from now for ``budget_s`` seconds."""
        watch = Watch(time.monotonic() + budget_s)
        with self._cond:
            heapq.heappush(self._heap, (watch.deadline, next(self._order), watch))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="aws-watchdog", daemon=True)
                self._thread.start()
            if watch.deadline < self._wake_at:
                self._wake_at = watch.deadline
                self._cond.notify()
        _current.watch = watch
        return watch

    def end(self, watch: Watch) -> None:
        """The attempt is over (answered, failed or abandoned): its socket is never shut after this."""
        _current.watch = None
        with self._cond:
            watch.over = True
            if watch.conn is not None and getattr(watch.conn, "_hps_watch", None) is watch:
                watch.conn._hps_watch = None
            watch.conn = None
            if watch.queued:
                self._ended += 1
                if self._ended > 64 and 2 * self._ended > len(self._heap):
                    self._prune()

    def _prune(self) -> None:
        """Drop the attempts that are over from the heap (amortised: at most once per half a heap of
        ends). ``_wake_at`` is left as it is: the watchdog waking once early costs less than a notify."""
        # The heap's top stays, over or not: it is the deadline the watchdog sleeps until. A heap pruned
        # empty would have the watchdog, when next it looks, wait for a notify, and the next call
        # would pay the thread switch this module exists to save (how often depended on scheduling).
        top = self._heap[0] if self._heap else None
        kept = [] if top is None else [top]
        for entry in self._heap:
            if entry is top:
                continue
            if entry[2].over:
                entry[2].queued = False
            else:
                kept.append(entry)
        if top is not None and top[2].over:
            self._ended = 1  # the top is still queued and over: its pop takes it off the count
        else:
            self._ended = 0
        heapq.heapify(kept)
        self._heap = kept

    def returned(self, conn: Any) -> None:
        """``conn`` went back to its pool (its answer was read to the end): no attempt carries it now, so
        a deadline passing before the attempt that used it is marked over must not shut it, whoever
        takes it from the pool next."""
        with self._cond:
            watch = getattr(conn, "_hps_watch", None)
            if watch is not None:
                conn._hps_watch = None
                if watch.conn is conn:
                    watch.conn = None

    def left(self) -> float | None:
        """Seconds left of the attempt watched on this thread, if any."""
        watch: Watch | None = getattr(_current, "watch", None)
        return None if watch is None else watch.deadline - time.monotonic()

    def carries(self, conn: Any) -> None:
        """``conn`` carries the attempt watched on this thread (called by the connection, on this thread)."""
        watch: Watch | None = getattr(_current, "watch", None)
        if watch is None:
            return
        with self._cond:
            # The connection is this attempt's now: an earlier attempt's late deadline leaves it alone.
            conn._hps_watch = watch
            watch.conn = conn
            fired = watch.fired
        if fired:
            raise Expired("the attempt's deadline passed")

    @property
    def watched(self) -> int:
        """Attempts being watched now."""
        with self._cond:
            return sum(1 for _, _, w in self._heap if not w.over)

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                # Only what is due is taken off: an attempt that ended early stays until its deadline,
                # so the heap does not run empty between two quick calls, and a new deadline (later
                # than every queued one) is registered without a notify. Waking on a thread switch
                # per call was what load made this do: each time the watchdog ran between a call's end
                # and the next start, it emptied the heap and the next start had to wake it.
                while self._heap and self._heap[0][0] <= now:
                    _, _, watch = heapq.heappop(self._heap)
                    watch.queued = False
                    if watch.over:
                        self._ended -= 1
                    else:
                        watch.fired = True
                        if watch.conn is not None and getattr(watch.conn, "_hps_watch", None) is watch:
                            _shut_socket(getattr(watch.conn, "sock", None))
                self._wake_at = self._heap[0][0] if self._heap else math.inf
                self._cond.wait(None if not self._heap else max(self._wake_at - now, 0.0))

    def _after_fork(self) -> None:
        # A forked child has none of the parent's threads: it starts its own watchdog when it needs one.
        self._cond = threading.Condition(threading.Lock())
        self._heap = []
        self._ended = 0
        self._wake_at = math.inf
        self._thread = None


def _shut_socket(sock: Any) -> None:
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


WATCHDOG = Watchdog()
os.register_at_fork(after_in_child=WATCHDOG._after_fork)


class _Carrier:
    """Mixed into botocore's connection classes: each step that may block tells the watchdog first."""

    def connect(self) -> None:
        WATCHDOG.carries(self)
        # Opening the connection (the TCP connect, a proxy's CONNECT, the TLS handshake) happens before
        # the watchdog can shut a socket it can reach: a TLS handshake reads from a socket the SSL
        # wrapper has already taken over. So the connect timeout, which bounds it all, is cut to what is
        # left of the attempt (urllib3 sets the read timeout again once connected).
        left = WATCHDOG.left()
        timeout = getattr(self, "timeout", None)
        if left is not None and (not isinstance(timeout, int | float) or timeout > left):
            self.timeout = max(left, 0.001)
        super().connect()  # type: ignore[misc]
        WATCHDOG.carries(self)  # a deadline that passed while connecting is kept now there is a socket

    def request(self, *args: Any, **kwargs: Any) -> Any:
        WATCHDOG.carries(self)
        return super().request(*args, **kwargs)  # type: ignore[misc]

    def getresponse(self, *args: Any, **kwargs: Any) -> Any:
        WATCHDOG.carries(self)
        return super().getresponse(*args, **kwargs)  # type: ignore[misc]


class WatchedHTTPConnection(_Carrier, AWSHTTPConnection):  # type: ignore[misc]  # botocore's own classes clash in the stubs
    pass


class WatchedHTTPSConnection(_Carrier, AWSHTTPSConnection):  # type: ignore[misc]
    pass


class _Returns:
    """Mixed into botocore's pool classes: a connection back in the pool is no attempt's any more."""

    def _put_conn(self, conn: Any) -> None:
        if conn is not None:
            WATCHDOG.returned(conn)
        super()._put_conn(conn)  # type: ignore[misc]


class WatchedHTTPConnectionPool(_Returns, AWSHTTPConnectionPool):
    ConnectionCls = WatchedHTTPConnection


class WatchedHTTPSConnectionPool(_Returns, AWSHTTPSConnectionPool):
    ConnectionCls = WatchedHTTPSConnection


def install(http_session: Any) -> bool:
    """Give botocore's urllib3 session the watched connections; False (nothing changed) if it is not
    one as this module knows it, or has already opened connections with its own."""
    found: object = getattr(http_session, "_pool_classes_by_scheme", None)
    manager = getattr(http_session, "_manager", None)
    if not isinstance(found, dict):
        return False
    classes: dict[str, Any] = found
    if getattr(manager, "pool_classes_by_scheme", None) is not classes:
        return False
    if classes.get("http") is not AWSHTTPConnectionPool or classes.get("https") is not AWSHTTPSConnectionPool:
        return False
    pools = getattr(manager, "pools", None)
    if pools is None or len(pools) or getattr(http_session, "_proxy_managers", None):
        return False
    # The manager and every proxy manager made later share this one dict (botocore hands it to each).
    classes["http"] = WatchedHTTPConnectionPool
    classes["https"] = WatchedHTTPSConnectionPool
    return True
