"""One rule for "this machine": the host is parsed out of the URL and compared as an address
(inputs/urls.py), used by ``emulator wait``, ``emulator serve --host`` and the loopback-stays-loopback rule
of aws/clients. A prefix match let ``http://127.0.0.1.nip.io`` and ``http://localhost.attacker.example`` in."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from hyperpod_scheduler.aws.clients import is_loopback
from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs.urls import loopback_host, loopback_url

LOCAL = [
    "http://127.0.0.1:4566",
    "http://127.3.4.5",
    "http://localhost:9",
    "http://LOCALHOST.:9/",
    "http://[::1]:80",
    "http://[::ffff:127.0.0.1]:80",
]
ELSEWHERE = [
    "http://127.0.0.1.nip.io",
    "http://127.0.0.1.nip.io:4566",
    "http://localhost.attacker.example",
    "http://localhost.attacker.example:4566/",
    "http://127.0.0.1@evil.example/",  # user info before the real host
    "http://[::1].evil.example",
    "http://bucket.localhost:9",  # may reach DNS: not known to be this machine
    "http://10.0.0.1",
    "http://0.0.0.0:80",
    "http://127.0.0.1:99999",  # not a URL anything can be sent to
    "ftp://127.0.0.1/",
    "",
]


@pytest.mark.parametrize("url", LOCAL)
def test_loopback_urls_are_recognised_by_their_address(url: str) -> None:
    assert loopback_url(url) and is_loopback(url)


@pytest.mark.parametrize("url", ELSEWHERE)
def test_names_that_only_start_like_loopback_are_other_machines(url: str) -> None:
    assert not loopback_url(url) and not is_loopback(url)


HOSTS = [("localhost", True), ("::1", True), ("[::1]", True), ("127.1.1.1", True), ("127.0.0.1.nip.io", False),
         ("localhost.evil", False), ("0.0.0.0", False)]  # fmt: skip


@pytest.mark.parametrize(("host", "local"), HOSTS)
def test_a_listening_host_is_judged_the_same_way(host: str, local: bool) -> None:
    assert loopback_host(host) is local


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1.nip.io", "http://localhost.attacker.example:4566", "http://127.0.0.1@evil.example"]
)
def test_emulator_wait_refuses_a_url_that_only_starts_like_loopback(url: str) -> None:
    result = CliRunner().invoke(app, ["emulator", "wait", "--endpoint", url, "--timeout", "0.1"])
    assert isinstance(result.exception, UsageError), result.output
    assert "is not a loopback http:// URL" in str(result.exception)
