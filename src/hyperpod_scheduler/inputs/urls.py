"""Webhook URLs from a config or the environment, judged before anything is sent: https only (http:// to
this machine when a test or a local receiver asks for it), no credentials in the URL, and no address a
webhook has no business reaching (private, link-local where instance metadata lives, shared, reserved).
The URL is a secret (its path authorises posting): no error here quotes it.

``notify.webhook`` applies the same address rule to every address the host name resolves to, at send time.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from hyperpod_scheduler.errors import UsageError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class WebhookUrl:
    scheme: str
    host: str
    port: int
    target: str  # path and query, as posted

    def __repr__(self) -> str:
        return "WebhookUrl(<redacted>)"


def parse_url(url: str, *, allow_loopback: bool = False, where: str = "webhook URL") -> WebhookUrl:
    """The URL's parts, or one ``UsageError`` that says what is wrong without quoting it."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise UsageError(f"{where}: not a URL (not shown: it is a secret)") from None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    if scheme not in ("https", "http"):
        raise UsageError(f"{where}: must be an https:// URL (not shown: it is a secret)")
    if not host:
        raise UsageError(f"{where}: names no host (not shown: it is a secret)")
    if parts.username is not None or parts.password is not None:
        raise UsageError(f"{where}: must not carry a user name or password (not shown: it is a secret)")
    loopback = _loopback_name(host)
    if scheme == "http" and not (allow_loopback and loopback):
        raise UsageError(
            f"{where}: must be an https:// URL; http:// is only for a loopback receiver with "
            "webhook_allow_loopback (not shown: it is a secret)"
        )
    if loopback and not allow_loopback:
        raise UsageError(f"{where}: points at this machine (not shown: it is a secret)")
    literal = _ip(host)
    if literal is not None:
        problem = refused_address(literal, allow_loopback)
        if problem:
            raise UsageError(f"{where}: {problem} (not shown: it is a secret)")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return WebhookUrl(scheme, host, port or (443 if scheme == "https" else 80), target)


def _ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _loopback_name(host: str) -> bool:
    literal = _ip(host)
    return host.lower() in ("localhost", "localhost.localdomain") if literal is None else literal.is_loopback


def refused_address(address: IPAddress, allow_loopback: bool) -> str | None:
    """Why a webhook may not be posted to ``address``, or None when it may."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return None if allow_loopback else "resolves to this machine"
    if address.is_link_local:
        return "resolves to a link-local address (instance metadata lives there)"
    if not address.is_global:  # private ranges, shared 100.64/10, unique-local, reserved, documentation
        return "resolves to a private or reserved address"
    if address.is_multicast:
        return "resolves to a multicast address"
    return None
