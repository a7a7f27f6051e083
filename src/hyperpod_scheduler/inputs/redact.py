"""What an error message may quote from a file or request: never a secret.

A config error used to quote the value of every scalar, so a misspelt ``notifications.webhook`` key
printed the webhook URL (whose path is the credential) into a terminal, a CI log or a cron mail.
The rule here is by key and by look: values under a secret-bearing key, under an unknown key (it may be
a misspelt secret), any URL, and anything shaped like a key or token are described, not shown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_SHOWN = 60  # characters of a harmless value quoted in an error

# Key names whose values authorise something.
SECRET_KEY = re.compile(
    r"(?i)(webhook|url|uri|token|secret|password|passwd|passphrase|credential|auth|api[-_]?key|private|cookie)"
)
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]*@")
# 20+ characters without spaces that mix letters and digits: an access key, a token, a signature.
_TOKEN_LIKE = re.compile(r"^(?=[^\s]*[A-Za-z])(?=[^\s]*\d)[^\s]{20,}$")


def secret_key(path: Sequence[Any]) -> bool:
    """Whether any key on ``path`` names a secret (``notifications.webhook_url``, ``auth.token``)."""
    return any(isinstance(p, str) and SECRET_KEY.search(p) for p in path)


def looks_secret(value: str) -> bool:
    return bool(_URL.search(value)) or (bool(_TOKEN_LIKE.match(value)) and not value.startswith("arn:"))


def shown(value: Any, path: Sequence[Any] = (), *, known_key: bool = True) -> str:
    """``value`` as an error may quote it: ``'abc'``, ``5``, or ``<not shown: ...>``."""
    if isinstance(value, dict | list | tuple | set):
        return f"<a {type(value).__name__}>"
    if not known_key:
        return "<not shown: unknown key>"
    if secret_key(path):
        return "<not shown: secret>"
    if isinstance(value, str) and looks_secret(value):
        return "<not shown: looks like a URL or token>"
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def scrub(text: str) -> str:
    """``text`` with the credentials of any URL in it removed (``https://user:pw@h`` -> ``https://***@h``),
    an endpoint botocore names shown by ``endpoint`` (no user, no query), and the value of any query
    parameter whose name says it is a secret (``?token=...``) masked."""
    # Most text (every cell of a long table or JSON listing) holds none of what the three patterns need:
    # an '@' (user info), an '=' (a query parameter) or the word endpoint (ASCII only: re's IGNORECASE
    # also folds a few non-ASCII letters, so other text takes the full path). Three regex passes per
    # string were most of the time of a 40,000-row plan's output.
    if text.isascii() and "@" not in text and "=" not in text and "endpoint" not in text.lower():
        return text
    return _scrub_all(text)


def _scrub_all(text: str) -> str:
    text = _ENDPOINT_SAID.sub(lambda m: m.group(1) + endpoint(m.group(2)), text)
    text = _USERINFO.sub(r"\1***@", text)
    return _SECRET_PARAM.sub(r"\1***", text)


def endpoint(url: str) -> str:
    """An endpoint URL as a message may show it: without user name, password, query or fragment, which
    can carry a credential (``admin:S3CRETPW@host``, ``?token=...``); with or without a scheme."""
    shown = _LEADING_USERINFO.sub(r"\1***@", url.strip())
    cut = min((i for i in (shown.find("?"), shown.find("#")) if i >= 0), default=-1)
    return shown if cut < 0 else shown[:cut] + "?***"


# botocore's phrases: 'endpoint URL: "http://..."', 'Invalid endpoint: ...'.
_ENDPOINT_SAID = re.compile(r'(?i)(endpoint(?: url)?:\s*"?)([^\s"]+)')
_LEADING_USERINFO = re.compile(r"(?i)^((?:[a-z][a-z0-9+.-]*://)?)[^/?#@\s]*@")
_SECRET_PARAM = re.compile(
    r"(?i)([?&;][^=&\s]*(?:token|secret|password|passwd|signature|sig|credential|auth|key)[^=&\s]*=)[^&\s\"']*"
)
