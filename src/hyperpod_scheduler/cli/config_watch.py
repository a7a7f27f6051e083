"""The config file ``run`` follows: an edit is noticed between ticks and applied, a broken one reported."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from hyperpod_scheduler.cli.output import console, error_line
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.inputs import bounded


class ConfigWatch:
    """Notices edits of the config file between ticks (content, not timestamps: an edit within one
    second, or a copy that keeps the mtime, still counts)."""

    SETTLE_S = 0.2  # an editor's non-atomic save: the content must read the same twice this far apart

    def __init__(self, path: Path, pause: Callable[[float], None] = time.sleep) -> None:
        self.path = path
        self.pause = pause
        self.seen = self._read()

    def _read(self) -> bytes | None:
        try:  # bounded, and a regular file only: a FIFO swapped in for the config must not stop the loop
            return bounded.read_bytes(self.path)
        except bounded.BadDocument:
            return None

    def changed(self, current: Config) -> Config | None:
        """The new config if the file changed and parses; None otherwise (a broken edit is reported
        once, and the config in force stays; a file caught mid-save is looked at again next tick)."""
        now = self._read()
        if now == self.seen:
            return None
        self.pause(self.SETTLE_S)
        if self._read() != now:
            return None  # still being written
        self.seen = now
        if now is None:
            error_line(f"config {self.path}: cannot be read any more; keeping the last good config")
            return None
        try:
            config = load_config(self.path)
        except HyperpodSchedulerError as exc:
            error_line(f"{exc}; keeping the last good config")
            return None
        if (config.state, config.notifications) != (current.state, current.notifications):
            error_line(f"config {self.path}: `state` and `notifications` changes take effect when run restarts")
        console.print(f"run: config {self.path} changed; following it from this tick", highlight=False)
        return config
