"""Webhook URLs from a config or the environment, judged before anything is sent: https only (http:// to
this machine when a test or a local receiver asks for it), no credentials in the URL, and no address a
webhook has no business reaching (private, link-local where instance metadata lives, shared, reserved).
The URL is a secret (its path authorises posting): no error here quotes it.

``notify.webhook`` applies the same address rule to every address the host name resolves to, at send time.

``loopback_host`` and ``loopback_url`` are the one rule for "this machine" (the emulator's endpoint,
``emulator wait``, the loopback-stays-loopback rule of aws/clients): the host is parsed out of the URL and
compared as an address, so ``http://127.0.0.1.nip.io`` and ``http://localhost.attacker.example`` (which
a prefix match let through) are other machines.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from hyperpod_scheduler.errors import UsageError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# The one name every resolver maps to loopback without asking DNS; ``x.localhost`` may reach DNS.
LOOPBACK_NAME = "localhost"
_BRACKETED = re.compile(r"\[[^\]]*\](:[0-9]*)?")


def loopback_host(host: str) -> bool:
    """Whether ``host`` (a URL's host, a ``--host`` value; ``[::1]`` brackets allowed) is this machine: a
    loopback address (127.0.0.0/8, ::1, ::ffff:127.x) or the name ``localhost``."""
    name = host.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name == LOOPBACK_NAME:
        return True
    address = _ip(name.split("%", 1)[0])  # fe80::1%eth0: the zone is not part of the address
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address is not None and address.is_loopback


def loopback_url(url: str | None, schemes: tuple[str, ...] = ("http", "https")) -> bool:
    """Whether ``url`` is a well-formed URL of one of ``schemes`` whose host is this machine."""
    try:
        parts = urlsplit((url or "").strip())
        parts.port  # noqa: B018 - a bad port is not a URL anything can be sent to
    except ValueError:
        return False
    where = parts.netloc.rpartition("@")[2]
    if where.startswith("[") and not _BRACKETED.fullmatch(where):
        return False  # http://[::1].evil.example: urlsplit reads ::1, a client would look the whole name up
    return parts.scheme.lower() in schemes and loopback_host(parts.hostname or "")


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
    # Refusing, not trusting: the distributions' other name for this machine is refused as well.
    return loopback_host(host) or host.lower() == "localhost.localdomain"


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
