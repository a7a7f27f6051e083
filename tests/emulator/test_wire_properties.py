"""Whatever bytes arrive, the emulator answers in AWS's shape: a result, or a client error, never a 500."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.emulator.protocol import region_from_authorization
from tests.emulator.clients import T0
from tests.emulator.emu_requests import create_request

OPERATIONS = ["CreateCluster", "DescribeCluster", "UpdateCluster", "ListClusters", "ListClusterNodes", "AddTags"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def _mutations() -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """A valid CreateCluster request with one member replaced by an arbitrary JSON value, and its name."""
    base = create_request("prop", worker_type="ml.c5.xlarge")
    paths = [("ClusterName",), ("InstanceGroups",)] + [
        ("InstanceGroups", 1, key) for key in ("InstanceCount", "InstanceType", "LifeCycleConfig", "SlurmConfig")
    ]

    def apply(path: tuple[Any, ...], value: Any) -> tuple[str, dict[str, Any]]:
        request = json.loads(json.dumps(base))
        target = request
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
        return str(path[-1]), request

    return st.builds(apply, st.sampled_from(paths), json_values)


@pytest.fixture(scope="module")
def shared() -> Iterator[Emulator]:
    with running_emulator(virtual_start=T0, check_answers=True) as emulator:
        yield emulator


def _post(emu: Emulator, operation: str, body: bytes) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=10)
    conn.request("POST", "/", body, {"X-Amz-Target": f"SageMaker.{operation}"})
    resp = conn.getresponse()
    payload = json.loads(resp.read())
    conn.close()
    return resp.status, payload


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    operation=st.sampled_from(OPERATIONS),
    body=st.binary(max_size=64) | json_values.map(lambda v: json.dumps(v).encode()),
)
def test_arbitrary_bodies_get_client_errors_not_crashes(shared: Emulator, operation: str, body: bytes) -> None:
    status, payload = _post(shared, operation, body)
    assert status in (200, 400), payload
    if status == 400:
        assert payload["__type"] in {"ValidationException", "SerializationException", "ResourceNotFound"}
        assert payload["message"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=_mutations())
def test_damaged_create_requests_are_refused_by_name(shared: Emulator, mutation: tuple[str, dict[str, Any]]) -> None:
    member, request = mutation
    shared.backend.reset()
    status, payload = _post(shared, "CreateCluster", json.dumps(request).encode())
    assert status in (200, 400), payload
    if status == 400:
        assert payload["__type"] == "ValidationException", payload
        assert member in payload["message"], payload


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(when=st.integers(-(2**63), 2**63) | st.floats(allow_nan=False) | st.text(max_size=30))
def test_any_timestamp_filter_is_answered_or_refused(shared: Emulator, when: Any) -> None:
    status, payload = _post(shared, "ListClusters", json.dumps({"CreationTimeAfter": when}).encode())
    assert status == 200 or (status, payload["__type"]) == (400, "ValidationException"), payload


@given(region=st.from_regex(r"[a-z]{2}(-[a-z]+)+-[0-9]", fullmatch=True))
def test_the_region_is_read_from_any_credential_scope(region: str) -> None:
    header = f"AWS4-HMAC-SHA256 Credential=AKID/20261130/{region}/sagemaker/aws4_request, Signature=abc"
    assert region_from_authorization(header) == region
    assert region_from_authorization(None) == "us-east-1"
