"""The AWS JSON 1.1 wire protocol as boto3 (and a plain HTTP client) sees it: errors, faults, endpoints."""

from __future__ import annotations

import http.client
import json
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.emulator.clients import REGION, make_client
from tests.emulator.emu_requests import create_request


def _error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, str, int]:
    err = exc.value.response["Error"]
    return err["Code"], err["Message"], exc.value.response["ResponseMetadata"]["HTTPStatusCode"]


@pytest.fixture
def emu(served_emu: Emulator) -> Emulator:
    """The wire itself is under test: every request here crosses loopback HTTP."""
    return served_emu


def _raw(emu: Emulator, target: str | None, body: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=10)
    headers = {"Content-Type": "application/x-amz-json-1.1"}
    if target is not None:
        headers["X-Amz-Target"] = target
    conn.request("POST", "/", body, headers)
    resp = conn.getresponse()
    payload = json.loads(resp.read())
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload


def test_unknown_cluster_is_resource_not_found_in_aws_error_shape(sm: Any) -> None:
    with pytest.raises(sm.exceptions.ResourceNotFound) as exc:
        sm.describe_cluster(ClusterName="no-such-cluster")
    code, message, status = _error(exc)
    assert (code, status) == ("ResourceNotFound", 400)
    assert "no-such-cluster" in message
    assert exc.value.response["ResponseMetadata"]["RequestId"]


def test_model_validation_happens_on_the_server(client_for: Any) -> None:
    raw = client_for(config=Config(parameter_validation=False, retries={"max_attempts": 1}))
    request = create_request("bad-count")
    request["InstanceGroups"][0]["InstanceCount"] = "one"
    del request["InstanceGroups"][1]["ExecutionRole"]
    with pytest.raises(ClientError) as exc:
        raw.create_cluster(**request)
    code, message, status = _error(exc)
    assert (code, status) == ("ValidationException", 400)
    assert "InstanceGroups[0].InstanceCount" in message
    assert "ExecutionRole" in message


def test_enum_values_are_checked_on_the_server(client_for: Any) -> None:
    raw = client_for(config=Config(parameter_validation=False, retries={"max_attempts": 1}))
    request = create_request("bad-type", worker_type="ml.p5.huge")
    with pytest.raises(ClientError) as exc:
        raw.create_cluster(**request)
    code, message, _ = _error(exc)
    assert code == "ValidationException"
    assert "InstanceGroups[1].InstanceType" in message and "ml.p5.huge" in message


def test_semantic_rules_are_the_shared_ones(sm: Any) -> None:
    request = create_request("two-entry-points")
    request["InstanceGroups"][0]["LifeCycleConfig"] = {
        "SourceS3Uri": "s3://sagemaker-x/",
        "OnCreate": "a.sh",
        "OnInitComplete": "b.sh",
    }
    with pytest.raises(ClientError) as exc:
        sm.create_cluster(**request)
    code, message, _ = _error(exc)
    assert code == "ValidationException"
    assert "mutually exclusive" in message


def test_region_comes_from_the_credential_scope(emu: Emulator) -> None:
    eu = make_client(emu.endpoint, region="eu-central-1")
    arn = eu.create_cluster(**create_request("regional", worker_type="ml.c5.xlarge"))["ClusterArn"]
    assert arn.startswith("arn:aws:sagemaker:eu-central-1:123456789012:cluster/")
    # Clusters are per region, like AWS: the same name is unknown in another region.
    with pytest.raises(ClientError) as exc:
        make_client(emu.endpoint, region=REGION).describe_cluster(ClusterName="regional")
    assert _error(exc)[0] == "ResourceNotFound"


def test_unknown_target_and_malformed_json(emu: Emulator) -> None:
    status, headers, body = _raw(emu, "SageMaker.MakeCoffee", b"{}")
    assert (status, body["__type"]) == (400, "UnknownOperationException")
    assert headers["x-amzn-errortype"] == "UnknownOperationException"
    status, _, body = _raw(emu, None, b"{}")
    assert (status, body["__type"]) == (400, "UnknownOperationException")
    status, headers, body = _raw(emu, "SageMaker.DescribeCluster", b'{"ClusterName": ')
    assert (status, body["__type"]) == (400, "SerializationException")
    assert headers["x-amzn-requestid"]


def test_connections_are_kept_alive(emu: Emulator) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=10)
    headers = {"X-Amz-Target": "SageMaker.ListClusters", "Content-Type": "application/x-amz-json-1.1"}
    for _ in range(3):
        conn.request("POST", "/", b"{}", headers)
        resp = conn.getresponse()
        assert resp.status == 200
        assert json.loads(resp.read()) == {"ClusterSummaries": []}
        assert not resp.will_close
    conn.close()


def test_full_throttling_reaches_a_client_without_retries(emu: Emulator, sm: Any) -> None:
    emu.faults.throttle_rate = 1.0
    with pytest.raises(ClientError) as exc:
        sm.list_clusters()
    assert _error(exc)[0::2] == ("ThrottlingException", 400)


def test_standard_retries_ride_out_partial_throttling(emu: Emulator, client_for: Any) -> None:
    emu.faults.update({"throttle_rate": 0.3, "seed": 11})
    patient = client_for(config=Config(retries={"mode": "standard", "max_attempts": 10}))
    retried = 0
    for _ in range(8):
        resp = patient.list_clusters(MaxResults=10)
        assert resp["ClusterSummaries"] == []
        retried += resp["ResponseMetadata"]["RetryAttempts"]
    assert retried > 0, "a 30% throttle rate over 8 calls should have forced at least one retry"


def test_injected_errors_are_http_500(emu: Emulator, sm: Any) -> None:
    emu.faults = {"error_rate": 1.0}
    with pytest.raises(ClientError) as exc:
        sm.list_clusters()
    assert _error(exc)[0::2] == ("InternalFailure", 500)
    emu.faults.error_rate = 0.0
    assert sm.list_clusters()["ClusterSummaries"] == []


def test_bad_fault_settings_are_refused() -> None:
    from hyperpod_scheduler.errors import UsageError

    with pytest.raises(UsageError, match="throttle_rate"), running_emulator(faults={"throttle_rate": 1.5}):
        pass


def test_endpoint_from_the_environment(emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", emu.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "dummy")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    client = boto3.Session(region_name="ap-southeast-2").client("sagemaker")
    assert client.list_clusters()["ClusterSummaries"] == []


def _admin(emu: Emulator, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=10)
    conn.request(method, f"/_emulator/{path}", json.dumps(body).encode() if body is not None else None)
    resp = conn.getresponse()
    payload = json.loads(resp.read())
    conn.close()
    return resp.status, payload


def test_admin_endpoints(emu: Emulator, sm: Any) -> None:
    status, health = _admin(emu, "GET", "health")
    assert (status, health["status"], health["virtual"]) == (200, "ok", True)
    status, clock = _admin(emu, "POST", "clock", {"advance_seconds": 3600})
    assert status == 200 and clock["now"].startswith("2026-11-30T09:00:00")
    status, clock = _admin(emu, "POST", "clock", {"set": "2026-11-30T10:30:00Z"})
    assert status == 200 and clock["now"].startswith("2026-11-30T10:30:00")
    status, err = _admin(emu, "POST", "clock", {"set": "2026-11-29T00:00:00Z"})
    assert status == 400 and "backwards" in err["message"]
    status, faults = _admin(emu, "POST", "faults", {"throttle_rate": 1.0, "latency_ms": 1})
    assert status == 200 and (faults["throttle_rate"], faults["latency_ms"]) == (1.0, 1.0)
    assert emu.faults.latency_ms == 1.0
    with pytest.raises(ClientError):
        sm.list_clusters()
    status, err = _admin(emu, "POST", "faults", {"throttle": 1.0})
    assert status == 400 and "throttle" in err["message"]
    _admin(emu, "POST", "faults", {"throttle_rate": 0})
    sm.create_cluster(**create_request("to-reset", worker_type="ml.c5.xlarge"))
    assert _admin(emu, "POST", "reset", {})[0] == 200
    assert sm.list_clusters()["ClusterSummaries"] == []
    assert _admin(emu, "GET", "nowhere")[0] == 404


def test_a_real_time_clock_cannot_be_moved() -> None:
    with running_emulator(speed=60, check_answers=True) as emu:
        status, clock = _admin(emu, "GET", "clock")
        assert (status, clock["virtual"]) == (200, False)
        status, err = _admin(emu, "POST", "clock", {"advance_seconds": 60})
        assert (status, err["__type"]) == (400, "ValidationException")
        assert "paused" in err["message"]


def test_a_real_time_clock_can_be_paused_and_resumed_over_http() -> None:
    with running_emulator(speed=100_000, check_answers=True) as emu:
        status, clock = _admin(emu, "POST", "clock", {"pause": True})
        assert (status, clock["paused"]) == (200, True)
        frozen = clock["now"]
        assert _admin(emu, "GET", "clock")[1]["now"] == frozen
        status, err = _admin(emu, "POST", "clock", {"pause": "yes"})
        assert status == 400 and "pause" in err["message"] and "'yes'" in err["message"]
        status, clock = _admin(emu, "POST", "clock", {"pause": False})
        assert (status, clock["paused"]) == (200, False)
        later = _admin(emu, "GET", "clock")[1]["now"]
        assert later > frozen


def test_leaving_the_context_closes_the_port_and_open_connections() -> None:
    with running_emulator(speed=1, check_answers=True) as emu:
        conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=10)
        conn.request("GET", "/_emulator/health")
        assert conn.getresponse().read()
        port = emu.port
    # The kept-alive connection was ended by the server, and nothing listens any more.
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        conn.request("GET", "/_emulator/health")
        conn.getresponse()
    with pytest.raises(ConnectionRefusedError):
        http.client.HTTPConnection("127.0.0.1", port, timeout=10).connect()
