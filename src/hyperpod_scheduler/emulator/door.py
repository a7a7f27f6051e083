"""Who may talk to the emulator: its own rules (the emulator is a witness and imports no product module).

Loopback is not a boundary for a browser. A page on any domain that resolves to 127.0.0.1 (DNS
rebinding) sends its own name as Host; a page on any site can send a cross-site "simple" POST
(``text/plain``, a form) without asking first. Either could read the emulator's state, set faults or
delete clusters. So every request must name this emulator in Host (a loopback name or address, an IP
literal, or the address it listens on; and the port it serves), a request from a page must come from
such an origin, and a browser-shaped POST (``text/plain``, ``multipart/form-data``: what a form or
``fetch`` sends cross-site without a preflight) is refused. The AWS CLI and boto3 send
``Host: 127.0.0.1:PORT``, no Origin and their own content types, so they pass unchanged.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

# What a browser may POST cross-site without a preflight; no AWS SDK call the emulator serves uses them.
# The third simple type, application/x-www-form-urlencoded, is what `curl -d` and urllib send by default
# to the admin routes: it is refused only from a page (with an Origin, which the Origin rule judges).
SIMPLE_TYPES = ("text/plain", "multipart/form-data")


def _host_and_port(value: str) -> tuple[str, int | None] | None:
    text = value.strip().lower()
    try:
        parts = urlsplit(f"//{text}")
        port = parts.port
    except ValueError:
        return None
    host = (parts.hostname or "").rstrip(".")
    if not host or parts.username is not None or parts.path or parts.query:
        return None
    return host, port


def _known_host(host: str, served: str) -> bool:
    if host in ("localhost", served.lower()) or host.endswith(".localhost"):  # bucket.localhost: S3 virtual hosts
        return True
    try:
        ipaddress.ip_address(host)  # a rebinding page always sends its own name, never an address
    except ValueError:
        return False
    return True


def host_allowed(header: str | None, served: str, port: int) -> bool:
    """Whether a Host header names this emulator (no Host at all: an HTTP/1.0 client, never a browser)."""
    if header is None:
        return True
    found = _host_and_port(header)
    if found is None:
        return False
    host, given = found
    return _known_host(host, served) and (given or 80) == port


def origin_allowed(origin: str | None, served: str, port: int) -> bool:
    """Whether the page a request comes from (its Origin header) is this emulator itself."""
    if origin is None:
        return True
    parts = _host_and_port(origin.strip().lower().removeprefix("http://")) if origin.startswith("http://") else None
    return parts is not None and _known_host(parts[0], served) and (parts[1] or 80) == port


def refusal(method: str, headers: Mapping[str, str], served: str, port: int) -> str | None:
    """Why the request is refused (one line that quotes nothing from it), or None."""
    if not host_allowed(headers.get("Host"), served, port):
        return f"the emulator answers only for loopback names and addresses on port {port} (Host refused)"
    if not origin_allowed(headers.get("Origin"), served, port) or headers.get("Sec-Fetch-Site") == "cross-site":
        return "the emulator does not answer requests from other web pages (Origin refused)"
    kind = (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
    if method == "POST" and kind in SIMPLE_TYPES:
        return f"POST with Content-Type {kind} refused: a browser sends it cross-site without asking"
    return None
