"""Waiting for a process that serves the dashboard: the URL it prints, then its first page."""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request


def url_in_output(proc: subprocess.Popen[str], pattern: str, within_s: float, seen: list[str]) -> str | None:
    """The first group of ``pattern`` in a line ``proc`` prints within ``within_s`` (None if it ends or
    runs out of time first); every line read is appended to ``seen``."""
    deadline = time.monotonic() + within_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            return None
        seen.append(line)
        found = re.search(pattern, line)
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
