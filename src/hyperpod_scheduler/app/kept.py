"""What a face built from the looks (the Fleet page's thousand rows), kept a few seconds: a page viewed
by several people, or reloaded, is not built again for each request while nothing it was built from moved.

A build is kept under its ``token`` (what it depends on besides the looks: the config, the pause) and the
looks' ``version`` when it began (``app.looks``: every look kept moves it), so a look, an action or a
changed config makes it old at once. While stale it is still given, and built again beside the request,
one build of a name at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

FLIGHT_WAIT_S = 60.0  # a request waits this long at most for a build under way, then builds its own


@dataclass(frozen=True)
class _Made:
    token: Any
    version: int  # the looks' version when the build began: a look kept since makes it old
    wall: float  # time.monotonic() when the build began
    now: datetime  # the caller's clock then
    made: Any


@dataclass
class Kept:
    """The kept builds, by name; thread-safe. ``version``: the looks' version now; ``beside``: how a
    build runs beside the request that found it stale (the looks' threads, which ``Looks.close`` waits for)."""

    version: Callable[[], int]
    beside: Callable[[Callable[[], None]], None]
    _memo: dict[str, _Made] = field(default_factory=dict)
    _building: set[str] = field(default_factory=set)
    _flights: dict[str, threading.Event] = field(default_factory=dict)  # builds under way, by name
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(
        self, name: str, token: Any, build: Callable[[], Any], now: datetime, fresh_s: float, stale_s: float
    ) -> Any:
        """What ``build`` made for ``name`` under the same ``token`` and looks: as it is while younger than
        ``fresh_s``; while younger than ``stale_s``, as it is too, with a build of it again beside this
        request (one at a time); older, changed, or never made: built now. Age is measured on the wall
        clock and on the caller's ``now`` (a demo's clock that jumps ahead makes it old at once)."""
        with self._lock:
            held = self._memo.get(name)
            version = self.version()
        if held is not None and held.token == token and held.version == version:
            age = max(time.monotonic() - held.wall, abs((now - held.now).total_seconds()))
            if age < fresh_s:
                return held.made
            if age < stale_s:
                self._rebuild(name, token, build, now)
                return held.made
        return self._make(name, token, build, now, version)

    def _make(self, name: str, token: Any, build: Callable[[], Any], now: datetime, version: int) -> Any:
        """Build it, or, while a build of ``name`` is under way (the one the dashboard began as it
        started, or a request's), wait for that one and take it when it is of the same token and looks:
        a thousand rows are not built twice at once, each slowing the other."""
        with self._lock:
            flight = self._flights.get(name)
            mine = flight is None
            if flight is None:
                flight = self._flights[name] = threading.Event()
        if not mine:
            flight.wait(FLIGHT_WAIT_S)
            with self._lock:
                held = self._memo.get(name)
            if held is not None and held.token == token and held.version == version:
                return held.made
            return self._build(name, token, build, now, version)
        try:
            return self._build(name, token, build, now, version)
        finally:
            with self._lock:
                self._flights.pop(name, None)
            flight.set()

    def _build(self, name: str, token: Any, build: Callable[[], Any], now: datetime, version: int) -> Any:
        wall = time.monotonic()
        made = build()
        with self._lock:
            self._memo[name] = _Made(token, version, wall, now, made)
        return made

    def _rebuild(self, name: str, token: Any, build: Callable[[], Any], now: datetime) -> None:
        with self._lock:
            if name in self._building:
                return
            self._building.add(name)
            version = self.version()

        def run() -> None:
            try:
                self._make(name, token, build, now, version)
            finally:
                with self._lock:
                    self._building.discard(name)

        self.beside(run)
