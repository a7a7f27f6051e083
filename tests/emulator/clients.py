"""boto3 clients for the emulator suite, each checking every response against the service model."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.config import Config
from botocore.validate import ParamValidator

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
REGION = "us-west-2"
NO_RETRIES = Config(retries={"mode": "standard", "max_attempts": 1})


def _check_output(model: Any, parsed: dict[str, Any], **_: Any) -> None:
    """Fail the test when a successful response does not fit the operation's output shape."""
    if "Error" in parsed or model.output_shape is None:
        return
    body = {k: v for k, v in parsed.items() if k != "ResponseMetadata"}
    report = ParamValidator().validate(body, model.output_shape)
    assert not report.has_errors(), f"{model.name} response breaks the model:\n{report.generate_report()}"


def make_client(endpoint: str, config: Config = NO_RETRIES, region: str = REGION) -> Any:
    client = boto3.client(
        "sagemaker",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="dummy-secret",
        config=config,
    )
    client.meta.events.register("after-call.sagemaker", _check_output)
    return client
