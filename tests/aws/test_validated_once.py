"""An UpdateCluster validated in full as it was built is not validated again by botocore as it is sent;
any other request still is (nothing reaches the wire that botocore's own check would have stopped)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ParamValidationError

from hyperpod_scheduler.aws.clients import sagemaker_client
from hyperpod_scheduler.aws.deadlines import _Buffered
from hyperpod_scheduler.aws.model import validate_request
from tests.engine.conftest import three_tier_request

ANSWER = json.dumps({"ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc"}).encode()


def _update(name: str = "c1") -> dict[str, Any]:
    request = three_tier_request(name)
    return {k: request[k] for k in ("ClusterName", "InstanceGroups")}


def _client() -> tuple[Any, list[dict[str, Any]]]:
    client = sagemaker_client(
        region="us-east-1", endpoint_url="http://x.invalid", aws_access_key_id="t", aws_secret_access_key="t"
    )
    sent: list[dict[str, Any]] = []
    headers = {"Content-Type": "application/x-amz-json-1.1"}

    def answer(request: Any, **_: Any) -> AWSResponse:
        sent.append(json.loads(request.body))
        return AWSResponse(request.url, 200, headers, _Buffered(ANSWER))

    client.meta.events.register_first("before-send", answer)
    return client, sent


def test_a_validated_update_goes_out_as_it_was_built() -> None:
    client, sent = _client()
    request = _update()
    assert validate_request("UpdateCluster", request) == []
    client.update_cluster(**request)
    assert sent == [request]


def test_a_request_changed_after_its_check_is_stopped_by_botocore() -> None:
    client, sent = _client()
    request = _update()
    assert validate_request("UpdateCluster", request) == []
    changed = {**request, "InstanceGroups": [{**request["InstanceGroups"][0], "InstanceCount": "two"}]}
    with pytest.raises(ParamValidationError, match="InstanceCount"):
        client.update_cluster(**changed)
    assert sent == []
