"""A Slack-compatible incoming webhook, posted as a careful client would: https only, to a public address
checked before connecting (and the connection made to exactly that address, so DNS cannot swap it
after the check), no redirects, and one deadline for the whole exchange.

The old sender took any scheme (``file://`` was tried, ``http://`` to loopback was posted), followed a
302 to ``http://127.0.0.1/latest/meta-data/iam/security-credentials/`` (a blind SSRF), and a receiver
that dripped its answer held ``stop --wait`` for 196 s. The URL is a secret (its path authorises
posting): no error here quotes it, only what kind of problem it has.

``slack_text`` is the one place a message becomes Slack markup: every piece of outside text (a Slurm job
name, a ``ckpt:`` comment, an AWS message, a cluster name) has ``&``, ``<`` and ``>`` escaped as Slack
documents, so ``<!channel>`` pings nobody and ``<https://evil.example|Approve here>`` is not a link; only
the message's own link (the approval page) is written as one.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import socket
import ssl
import threading
import time
from typing import TYPE_CHECKING

from hyperpod_scheduler.inputs.urls import WebhookUrl, parse_url, refused_address

__all__ = [
    "WebhookChannel", "WebhookError", "WebhookUrl", "parse_url", "refused_address", "resolve",
    "slack_escaped", "slack_text",
]  # fmt: skip

if TYPE_CHECKING:
    from hyperpod_scheduler.notify.channels import Message

DEFAULT_TIMEOUT_S = 10.0
_MAX_ANSWER = 64 * 1024  # a webhook's answer is "ok"; more is read no further


_SLACK_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
# In a link's target, what would end it (``|``, ``>``) or start another (``<``) is percent-encoded.
_SLACK_LINK_TARGET = str.maketrans({"&": "&amp;", "<": "%3C", ">": "%3E", "|": "%7C"})


def slack_escaped(text: str) -> str:
    """``text`` shown as written in a Slack message: its control characters (``&``, ``<``, ``>``) escaped."""
    return text.translate(_SLACK_ESCAPES)


def slack_text(message: Message) -> str:
    """The message as a Slack-compatible webhook's ``text``: subject in bold, outside text escaped, the
    project's own link (``message.link``) as the only link."""
    out = f"*{slack_escaped(message.subject)}*\n{slack_escaped(message.text)}"
    if message.link:
        out += f"\nApprove or refuse: <{message.link.translate(_SLACK_LINK_TARGET)}>"
    return out


class WebhookError(Exception):
    """A delivery that failed; the message names the kind of failure, never the URL. ``retry`` says
    whether trying again could help (a timeout or a 5xx could; a refused address or a redirect not)."""

    def __init__(self, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


def resolve(url: WebhookUrl, allow_loopback: bool) -> str:
    """The one address to connect to: every address the name has must be public (a name that also
    resolves privately is refused whole, so round-robin DNS cannot sneak one in)."""
    try:
        infos = socket.getaddrinfo(url.host, url.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        why = getattr(exc, "strerror", None) or "bad name"
        raise WebhookError(f"its host name does not resolve ({why})", retry=True) from None
    addresses = [str(info[4][0]) for info in infos]
    for address in addresses:
        problem = refused_address(ipaddress.ip_address(address.split("%")[0]), allow_loopback)
        if problem:
            raise WebhookError(f"refused: its host {problem}")
    if not addresses:
        raise WebhookError("its host name has no address", True)
    return addresses[0]


class _Pinned(http.client.HTTPSConnection):
    """An HTTPS connection to a checked address, with the certificate verified for the URL's name."""

    def __init__(self, host: str, address: str, port: int, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address
        self._tls = context

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(raw, server_hostname=self.host)


class _PinnedPlain(http.client.HTTPConnection):
    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class WebhookChannel:
    """POST ``{"text": ...}`` as JSON. One ``send`` is one attempt; the dispatcher retries."""

    name = "webhook"

    def __init__(self, url: str, timeout_s: float = DEFAULT_TIMEOUT_S, *, allow_loopback: bool = False) -> None:
        self._url = parse_url(url, allow_loopback=allow_loopback)
        self.timeout_s = timeout_s
        self.allow_loopback = allow_loopback

    def __repr__(self) -> str:
        return "WebhookChannel(url=<redacted>)"

    def send(self, message: Message) -> None:
        body = json.dumps({"text": slack_text(message)}).encode()
        deadline = time.monotonic() + self.timeout_s
        address = resolve(self._url, self.allow_loopback)
        remaining = max(deadline - time.monotonic(), 0.1)
        conn: http.client.HTTPConnection = (
            _Pinned(self._url.host, address, self._url.port, remaining, ssl.create_default_context())
            if self._url.scheme == "https"
            else _PinnedPlain(self._url.host, address, self._url.port, remaining)
        )
        # One deadline for the whole exchange: a receiver that drips its answer is cut off here.
        watchdog = threading.Timer(remaining, _abort, args=(conn,))
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.request(
                "POST",
                self._url.target,
                body=body,
                headers={"Content-Type": "application/json", "User-Agent": "hyperpod-scheduler"},
            )
            answer = conn.getresponse()
            answer.read(_MAX_ANSWER)
            status = answer.status
        except (OSError, http.client.HTTPException) as exc:
            late = time.monotonic() >= deadline
            kind = f"no answer within {self.timeout_s:g} s" if late else f"{type(exc).__name__}"
            raise WebhookError(kind, retry=True) from None
        finally:
            watchdog.cancel()
            conn.close()
        if 300 <= status < 400:
            raise WebhookError(f"HTTP {status}: redirect refused (a webhook is posted where it is configured)")
        if status == 429 or status >= 500:
            raise WebhookError(f"HTTP {status}", retry=True)
        if status >= 400:
            raise WebhookError(f"HTTP {status}")


def _abort(conn: http.client.HTTPConnection) -> None:
    sock = conn.sock
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
