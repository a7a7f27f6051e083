"""Waiting for a process that serves the dashboard: the URL it prints, then its first page."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
import urllib.request


def url_in_output(proc: subprocess.Popen[str], pattern: str, within_s: float, seen: list[str]) -> str | None:
    """The first group of ``pattern`` in a line ``proc`` prints within ``within_s`` (None if it ends or
    runs out of time first); every line read is appended to ``seen``.

    Lines are read in a thread of their own, up to the one that matches (the caller reads the rest): a
    script that failed early while a background job it started (an emulator) holds its output open
    never ends that output, and a read here would wait forever. So the wait ends when ``proc`` has ended
    and no line came for a moment, or at ``within_s``, whatever the pipe does."""
    assert proc.stdout is not None
    stream = proc.stdout
    lines: queue.Queue[str | None] = queue.Queue()
    compiled = re.compile(pattern)

    def read() -> None:
        for line in iter(stream.readline, ""):
            lines.put(line)
            if compiled.search(line):
                return
        lines.put(None)

    threading.Thread(target=read, name="url-in-output", daemon=True).start()
    deadline = time.monotonic() + within_s
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            if proc.poll() is None:
                continue
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since > 1.0:
                return None  # it ended without the line; whatever holds its output open is not it
            continue
        if line is None:
            return None
        seen.append(line)
        found = compiled.search(line)
        if found:
            return found.group(1)
    return None


def first_page(url: str, tries: int, pause_s: float) -> str:
    """The page at ``url`` once the server answers ("" if it never did in ``tries``)."""
    for _ in range(tries):
        try:
            return str(urllib.request.urlopen(url, timeout=5).read().decode())
        except OSError:
            time.sleep(pause_s)
    return ""


# A test's own little HTTP server (a proxy, a webhook receiver) polls for shutdown this often:
# socketserver's default of 0.5 s made each one's shutdown() a wait of up to half a second, per test.
SHUTDOWN_POLL_S = 0.01
