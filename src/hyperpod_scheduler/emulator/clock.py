"""The emulator's sense of time: real time scaled by a speed factor, or a virtual clock a test moves.

Every state change in the model is scheduled at a datetime on this clock, so the same model runs a
ten-minute provisioning in one second (``RealClock(speed=600)``) or a week in a blink (``VirtualClock``).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


def _aware(t: datetime) -> datetime:
    if t.tzinfo is None:
        raise ValueError(f"clock time must be timezone-aware, got naive {t.isoformat()}")
    return t.astimezone(UTC)


class RealClock:
    """Wall-clock time scaled by ``speed`` from the moment of creation: now = start + elapsed * speed.

    ``pause()`` stops it until ``resume()``: a test (or a user rehearsing) can hold a cluster in
    Updating for as long as it needs, whatever the speed and however loaded the machine is.
    """

    def __init__(self, speed: float = 1.0, start: datetime | None = None) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be positive, got {speed}")
        self.speed = float(speed)
        self._start = _aware(start) if start is not None else datetime.now(UTC)
        self._mono = time.monotonic()
        self._paused_at: float | None = None
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            mono = self._paused_at if self._paused_at is not None else time.monotonic()
            return self._start + timedelta(seconds=(mono - self._mono) * self.speed)

    @property
    def paused(self) -> bool:
        return self._paused_at is not None

    def pause(self) -> None:
        with self._lock:
            if self._paused_at is None:
                self._paused_at = time.monotonic()

    def resume_from(self, t: datetime) -> None:
        """Jump forward to ``t`` if it is later than now (a restart resuming the last run's clock)."""
        t = _aware(t)
        with self._lock:
            mono = self._paused_at if self._paused_at is not None else time.monotonic()
            now = self._start + timedelta(seconds=(mono - self._mono) * self.speed)
            if t > now:
                self._start += t - now

    def resume(self) -> None:
        """Go on from where it stood: the paused stretch never happened on this clock."""
        with self._lock:
            if self._paused_at is not None:
                self._mono += time.monotonic() - self._paused_at
                self._paused_at = None


class VirtualClock:
    """A clock that only moves when told to; never backwards."""

    def __init__(self, start: datetime) -> None:
        self._now = _aware(start)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        if seconds < 0:
            raise ValueError(f"the virtual clock cannot go backwards (advance {seconds} s)")
        with self._lock:
            self._now = self._now + timedelta(seconds=seconds)
            return self._now

    def set(self, t: datetime) -> datetime:
        t = _aware(t)
        with self._lock:
            if t < self._now:
                raise ValueError(f"the virtual clock cannot go backwards ({t.isoformat()} < {self._now.isoformat()})")
            self._now = t
            return self._now
