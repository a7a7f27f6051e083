"""The suite stays on this machine: no test, fixture or module import reaches past loopback.

Two parts, both set up by tests/conftest.py before any botocore session exists:

- ``AWS_EC2_METADATA_DISABLED=true`` in the environment (children inherit it): a client built from the
  standard credential chain with no credentials in the environment otherwise asks the instance metadata
  service, 169.254.169.254, for them. Off EC2 that is a connect that fails at once or waits its 1 s
  timeout (likely why a fuzz test of 60 dashboard requests took 60 s in the first run after a boot); on
  a CI runner in EC2 it would hand the suite that runner's real credentials.
- ``guard()``: every ``connect`` of this process to an address that is not loopback, and every look-up
  of a name other than ``localhost`` (a question to a DNS server), is refused and remembered, and the
  test it happened in fails naming it (conftest's ``_stays_on_loopback``). Refusing alone would not
  do: the product catches a failed connect as "AWS unreachable", and the test would pass having tried
  the network.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
from typing import Any

ENV = {"AWS_EC2_METADATA_DISABLED": "true"}
_attempts: list[str] = []
_lock = threading.Lock()
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo
_real_gethostbyname = socket.gethostbyname


# Names this machine answers itself (/etc/hosts, RFC 6761's .localhost), compared without case or a
# final dot; and the unspecified addresses, which a connect on Linux takes as this machine.
_LOCAL_NAMES = frozenset({"", "localhost", "ip6-localhost", "ip6-loopback"})


def _local_name(host: str) -> bool:
    name = host.lower().rstrip(".")
    return name in _LOCAL_NAMES or name.endswith(".localhost")


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def _off_loopback(address: Any) -> str | None:
    """The endpoint as text when it is off this machine; None for loopback, local names, Unix sockets."""
    if not isinstance(address, tuple) or not address:
        return None  # AF_UNIX (a path) and the like: on this machine
    raw = address[0]
    host = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
    where = f"{host}:{address[1]}" if len(address) > 1 else host
    ip = _address(host)
    if ip is None:
        return None if _local_name(host) else where
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    if ip.is_loopback or ip.is_unspecified or (mapped is not None and mapped.is_loopback):
        return None
    return where


def _note(what: str) -> None:
    test = os.environ.get("PYTEST_CURRENT_TEST", "no test: collection or a session fixture")
    thread = threading.current_thread()
    # A thread other than the test's may be one an earlier test left running: named, so it is found.
    by = "" if thread is threading.main_thread() else f", from thread {thread.name!r}"
    with _lock:
        _attempts.append(f"{what} (during {test}{by})")


def _refuse(address: Any) -> None:
    where = _off_loopback(address)
    if where is None:
        return
    _note(where)
    raise ConnectionRefusedError(f"the test suite stays on loopback: a connect to {where} was refused")


def _connect(self: socket.socket, address: Any) -> None:
    _refuse(address)
    _real_connect(self, address)


def _connect_ex(self: socket.socket, address: Any) -> int:
    _refuse(address)
    return _real_connect_ex(self, address)


def _asked(host: Any) -> str | None:
    # A name to look up is a question to a DNS server (or a wait for its timeout). An address is no
    # question: it goes on to ``connect``, which refuses it there if it is off loopback.
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else host
    if name is not None and _address(name) is None and not _local_name(name):
        _note(f"a look-up of {name!r}")
        return f"the test suite stays on loopback: no look-up of {name!r}"
    return None


def _getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    refused = _asked(host)
    if refused is not None:
        raise socket.gaierror(socket.EAI_NONAME, refused)
    return _real_getaddrinfo(host, port, *args, **kwargs)


def _gethostbyname(host: str) -> str:
    refused = _asked(host)
    if refused is not None:
        raise socket.gaierror(socket.EAI_NONAME, refused)
    return _real_gethostbyname(host)


def guard(*, metadata_off: bool = True) -> None:
    """Install the guard in this process. ``metadata_off`` False leaves the metadata service to the
    product (tests/cost/loopback_run.py proves the demo and the tour never ask it on their own)."""
    if metadata_off:
        os.environ.update(ENV)
    socket.getaddrinfo = _getaddrinfo
    socket.gethostbyname = _gethostbyname
    socket.socket.connect = _connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]


def taken() -> list[str]:
    """The refused attempts since the last call (and forgets them): a test's own, and those of the
    wider fixtures set up for it (they run before the test's own fixtures)."""
    with _lock:
        seen = list(_attempts)
        _attempts.clear()
    return seen
