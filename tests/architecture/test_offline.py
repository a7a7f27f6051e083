"""The suite's own guard (tests/offline.py): nothing a test runs reaches past loopback, and a client
built from the standard credential chain does not ask the instance metadata service."""

from __future__ import annotations

import contextlib
import socket
import threading

import botocore.session
import pytest

from tests import offline


def test_a_connect_off_loopback_is_refused_and_named() -> None:
    with pytest.raises(ConnectionRefusedError, match=r"stays on loopback: a connect to 192\.0\.2\.1:443"):
        socket.create_connection(("192.0.2.1", 443), timeout=0.5)
    assert [t.split(" (")[0] for t in offline.taken()] == ["192.0.2.1:443"]  # taken: this test does not fail


def test_a_name_other_than_localhost_is_not_looked_up() -> None:
    with pytest.raises(socket.gaierror, match=r"stays on loopback: no look-up of 'example\.com'"):
        socket.create_connection(("example.com", 443), timeout=0.5)
    assert [t.split(" (")[0] for t in offline.taken()] == ["a look-up of 'example.com'"]


def test_loopback_is_left_alone() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=2):
            pass
        with socket.create_connection(("localhost", server.getsockname()[1]), timeout=2):
            pass
    assert offline.taken() == []


def test_a_client_with_no_credentials_does_not_ask_the_metadata_service(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    session = botocore.session.Session()
    assert session.get_credentials() is None
    assert offline.taken() == []  # before the guard's environment: one connect to 169.254.169.254:80


@pytest.fixture(scope="module")
def _reached_out_in_setup() -> None:
    with contextlib.suppress(OSError):
        socket.create_connection(("192.0.2.7", 443), timeout=0.5)


def test_what_a_wider_fixture_tried_reaches_the_test_it_was_set_up_for(_reached_out_in_setup: None) -> None:
    # Cleared when the test began, a module fixture's attempt would have passed unseen.
    tried = offline.taken()
    assert len(tried) == 1 and tried[0].startswith("192.0.2.7:443 (during ") and "(setup)" in tried[0]


def test_an_attempt_from_another_thread_names_it() -> None:
    def reach() -> None:
        with contextlib.suppress(OSError):
            socket.create_connection(("192.0.2.8", 80), timeout=0.5)

    thread = threading.Thread(target=reach, name="left-behind")
    thread.start()
    thread.join()
    assert [t.endswith(", from thread 'left-behind')") for t in offline.taken()] == [True]


@pytest.mark.parametrize("host", ["localhost.", "LOCALHOST", "ip6-localhost", "bucket.localhost", "::1", "0.0.0.0"])
def test_names_and_addresses_of_this_machine_are_left_alone(host: str) -> None:
    assert offline._off_loopback((host, 80)) is None
    assert offline._off_loopback((host.encode(), 80)) is None
