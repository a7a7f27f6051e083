"""boto3 clients built the standard way, so the credential/region chain and AWS_ENDPOINT_URL_* work.

No private endpoint flags: pointing a client at the emulator is done with the standard
``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_SAGEMAKER`` variables, which boto3 honours itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

# Adaptive retry backs off on ThrottlingException and 5xx without us writing a retry loop.
RETRY_CONFIG = Config(retries={"mode": "adaptive", "max_attempts": 8}, connect_timeout=5, read_timeout=30)


def session(profile: str | None = None, region: str | None = None) -> boto3.Session:
    return boto3.Session(profile_name=profile, region_name=region)


def sagemaker_client(
    profile: str | None = None, region: str | None = None, endpoint_url: str | None = None, **kw: Any
) -> SageMakerClient:
    sess = session(profile, region)
    return sess.client("sagemaker", endpoint_url=endpoint_url, config=kw.pop("config", RETRY_CONFIG), **kw)


def s3_client(profile: str | None = None, region: str | None = None) -> S3Client:
    return session(profile, region).client("s3", config=RETRY_CONFIG)
