"""The emulator's door (emulator/door.py): a DNS-rebinding page (its own name in Host) and a cross-site
simple POST (text/plain, a form) are refused before anything is read or changed; boto3 and the AWS CLI,
which send ``Host: 127.0.0.1:PORT`` and their own content types, are answered as before."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.emulator.clients import make_client
from tests.emulator.emu_requests import create_request


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with running_emulator(speed=600) as e:
        yield e


def _ask(emu: Emulator, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=10)
    conn.putrequest(method, path, skip_host=True)
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    answer = conn.getresponse()
    data = answer.read()
    conn.close()
    return answer.status, json.loads(data) if data.startswith(b"{") else data


def test_a_dns_rebinding_page_can_neither_read_nor_change_the_emulator(emu: Emulator) -> None:
    for host in ("attacker.example", f"attacker.example:{emu.port}", f"127.0.0.1.nip.io:{emu.port}"):
        status, body = _ask(emu, "GET", "/_emulator/state", {"Host": host})
        assert status == 421 and "Host refused" in body["message"] and "attacker" not in json.dumps(body)
        status, _ = _ask(emu, "POST", "/_emulator/faults", {"Host": host, "Content-Type": "application/json"},
                         b'{"error_rate": 1}')  # fmt: skip
        assert status == 421
    assert _ask(emu, "GET", "/_emulator/faults", {"Host": f"127.0.0.1:{emu.port}"})[1]["error_rate"] == 0


def test_the_wrong_port_in_host_is_refused(emu: Emulator) -> None:
    assert _ask(emu, "GET", "/_emulator/health", {"Host": f"127.0.0.1:{emu.port + 1}"})[0] == 421
    assert _ask(emu, "GET", "/_emulator/health", {"Host": f"localhost:{emu.port}"})[0] == 200


@pytest.mark.parametrize("kind", ["text/plain", "text/plain;charset=UTF-8", "multipart/form-data; boundary=x"])
def test_a_cross_site_simple_post_is_refused_and_changes_nothing(emu: Emulator, kind: str) -> None:
    host = {"Host": f"127.0.0.1:{emu.port}"}
    status, body = _ask(emu, "POST", "/_emulator/reset", {**host, "Content-Type": kind}, b"{}")
    assert status == 403 and "refused" in body["message"]
    status, _ = _ask(emu, "POST", "/", {**host, "Content-Type": kind, "X-Amz-Target": "SageMaker.ListClusters"}, b"{}")
    assert status == 403


def test_curl_d_to_an_admin_route_still_works(emu: Emulator) -> None:
    # `curl -d` and urllib send application/x-www-form-urlencoded; a page sending it also sends an Origin.
    headers = {"Host": f"127.0.0.1:{emu.port}", "Content-Type": "application/x-www-form-urlencoded"}
    assert _ask(emu, "POST", "/_emulator/faults", headers, b'{"error_rate": 0}')[0] == 200
    assert _ask(emu, "POST", "/_emulator/faults", {**headers, "Origin": "https://evil.example"}, b"{}")[0] == 403


def test_a_request_from_another_page_is_refused_by_its_origin(emu: Emulator) -> None:
    host = {"Host": f"127.0.0.1:{emu.port}", "Content-Type": "application/json"}
    for origin in ("https://evil.example", "http://127.0.0.1.nip.io", f"http://evil.example:{emu.port}", "null"):
        assert _ask(emu, "POST", "/_emulator/faults", {**host, "Origin": origin}, b'{"error_rate": 1}')[0] == 403
    assert _ask(emu, "GET", "/_emulator/state", {**host, "Sec-Fetch-Site": "cross-site"})[0] == 403
    same = {**host, "Origin": f"http://127.0.0.1:{emu.port}"}
    assert _ask(emu, "POST", "/_emulator/faults", same, b'{"error_rate": 0}')[0] == 200


def test_boto3_is_answered_unchanged(emu: Emulator) -> None:
    sm = make_client(emu.endpoint)
    sm.create_cluster(**create_request("door-boto3"))
    assert "door-boto3" in [c["ClusterName"] for c in sm.list_clusters()["ClusterSummaries"]]


@pytest.mark.skipif(shutil.which("aws") is None, reason="the AWS CLI is not installed")
def test_the_aws_cli_is_answered_unchanged(emu: Emulator) -> None:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "AWS_DEFAULT_REGION": "us-east-1"}
    env.pop("AWS_PROFILE", None)
    done = subprocess.run(
        ["aws", "sagemaker", "list-clusters", "--endpoint-url", emu.endpoint, "--output", "json"],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "ClusterSummaries" in json.loads(done.stdout)
