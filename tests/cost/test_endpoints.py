"""Every AWS client the CLI builds honours the standard endpoint variables, and loopback stays loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import botocore.credentials
import pytest

from hyperpod_scheduler.aws.clients import (
    AwsClients,
    aws_client,
    default_region,
    is_loopback,
    loopback_endpoint,
    s3_client,
    sagemaker_client,
)
from hyperpod_scheduler.errors import UsageError

SERVICES = ("s3", "fsx", "pricing", "sns", "sts", "dynamodb")
LOCAL = "http://127.0.0.1:8765"


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[pytest.MonkeyPatch]:
    for var in list(__import__("os").environ):
        if var.startswith("AWS_ENDPOINT_URL") or var in ("AWS_PROFILE", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    yield monkeypatch


@pytest.mark.parametrize("service", SERVICES)
def test_the_global_endpoint_variable_reaches_every_service(clean: pytest.MonkeyPatch, service: str) -> None:
    clean.setenv("AWS_ENDPOINT_URL", LOCAL)
    assert aws_client(service).meta.endpoint_url == LOCAL


@pytest.mark.parametrize("service", SERVICES)
def test_a_sagemaker_emulator_keeps_every_other_service_on_loopback(clean: pytest.MonkeyPatch, service: str) -> None:
    # The quick tour used to set only this one, and report then looked for the lifecycle bucket on AWS.
    clean.setenv("AWS_ENDPOINT_URL_SAGEMAKER", LOCAL)
    assert aws_client(service, region="us-west-2").meta.endpoint_url == LOCAL


def test_a_service_with_its_own_endpoint_keeps_it(clean: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The config file's services section is a standard source too (read once, when clients are first made).
    (tmp_path / "config").write_text(
        "[default]\nservices = local\n[services local]\nfsx =\n  endpoint_url = http://[::1]:9999\n"
    )
    clean.setenv("AWS_ENDPOINT_URL_SAGEMAKER", LOCAL)
    clean.setenv("AWS_ENDPOINT_URL_S3", "http://minio.internal:9000")
    assert s3_client().meta.endpoint_url == "http://minio.internal:9000"
    assert aws_client("fsx").meta.endpoint_url == "http://[::1]:9999"
    assert aws_client("sns").meta.endpoint_url == LOCAL


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:8766", "https://sagemaker.example.com"])
def test_finding_the_emulator_resolves_no_credentials(clean: pytest.MonkeyPatch, endpoint: str) -> None:
    # Without credentials anywhere, walking the chain ends at the instance metadata service: a wait off
    # EC2, and a call off loopback while an emulator is in use. Asking where SageMaker is needs neither.
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        clean.delenv(var)
    clean.setenv("AWS_ENDPOINT_URL_SAGEMAKER", endpoint)
    walked: list[str] = []
    clean.setattr(botocore.credentials.CredentialResolver, "load_credentials", lambda self: walked.append("chain"))
    assert loopback_endpoint() == (endpoint if endpoint.startswith("http://127.") else None)
    assert walked == []


def test_without_any_endpoint_clients_go_to_aws_as_usual() -> None:
    assert aws_client("s3").meta.endpoint_url.endswith(".amazonaws.com")
    assert aws_client("fsx", region="eu-west-1").meta.endpoint_url == "https://fsx.eu-west-1.amazonaws.com"


def test_a_fixed_endpoint_is_used_for_every_service_with_throwaway_credentials() -> None:
    clients = AwsClients("http://127.0.0.1:4000")
    for service in SERVICES:
        assert clients.client(service, region="us-east-1").meta.endpoint_url == "http://127.0.0.1:4000"


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8765", True),
        ("http://127.3.4.5", True),
        ("http://[::1]:80", True),
        ("http://localhost:9", True),
        ("http://bucket.localhost:9", False),  # may reach DNS (tests/inputs/test_loopback.py)
        ("https://s3.amazonaws.com", False),
        ("http://10.0.0.1", False),
        ("http://localhost.example.com", False),
        (None, False),
    ],
)
def test_what_counts_as_loopback(url: str | None, local: bool) -> None:
    assert is_loopback(url) is local


def test_aws_region_comes_before_aws_default_region_as_for_the_aws_cli(clean: pytest.MonkeyPatch) -> None:
    # botocore reads only AWS_DEFAULT_REGION: a cluster named without a region was looked for there.
    clean.setenv("AWS_REGION", "eu-west-1")
    clean.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert default_region() == "eu-west-1"
    assert aws_client("fsx").meta.region_name == "eu-west-1"
    assert sagemaker_client().meta.region_name == "eu-west-1"
    clean.delenv("AWS_REGION")
    assert default_region() == "us-west-2" and aws_client("fsx").meta.region_name == "us-west-2"


@pytest.mark.parametrize(("var", "value"), [("AWS_REGION", "US-EAST-1"), ("AWS_DEFAULT_REGION", "us-east-1/x")])
def test_a_region_from_the_environment_that_is_not_a_region_is_a_usage_error(
    clean: pytest.MonkeyPatch, var: str, value: str
) -> None:
    # 'US-EAST-1' made a second record of one cluster; 'us-east-1/x' ended in botocore's traceback.
    clean.delenv("AWS_DEFAULT_REGION")
    clean.setenv(var, value)
    with pytest.raises(UsageError, match=r"^\$AWS_.*is not an AWS region"):
        default_region()


def test_a_session_takes_aws_region_and_guesses_none(clean: pytest.MonkeyPatch) -> None:
    from hyperpod_scheduler.aws.clients import session

    clean.setenv("AWS_REGION", "eu-west-1")
    clean.delenv("AWS_DEFAULT_REGION")
    assert session().region_name == "eu-west-1"  # boto3 alone read only AWS_DEFAULT_REGION
    clean.delenv("AWS_REGION")
    assert session().region_name is None  # a store with no region says so (no us-east-1 guessed)
