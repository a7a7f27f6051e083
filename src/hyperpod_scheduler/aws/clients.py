"""boto3 clients built the standard way, so the credential/region chain and AWS_ENDPOINT_URL_* work.

No private endpoint flags: pointing a client at the emulator is done with the standard
``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_SAGEMAKER`` variables, which boto3 honours itself.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import ProfileNotFound

from hyperpod_scheduler.aws import answers
from hyperpod_scheduler.errors import UsageError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

# What AWS's own tools fall back to when no region is configured anywhere.
FALLBACK_REGION = "us-east-1"
_REGION_ENV = ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE")


def default_region(profile: str | None = None) -> str:
    """The region the standard AWS chain gives (AWS_REGION, AWS_DEFAULT_REGION, the profile's config
    file), else us-east-1. A cluster named without a region is looked for there, like the AWS CLI does."""
    return _chain_region(profile, tuple(os.environ.get(k) for k in _REGION_ENV))


@functools.lru_cache(maxsize=64)
def _chain_region(profile: str | None, env: tuple[str | None, ...]) -> str:
    # ``env`` is only the cache key: the chain itself reads the environment and config files.
    try:
        region = botocore.session.Session(profile=profile).get_config_variable("region")
    except ProfileNotFound:
        raise UsageError(f"profile {profile!r}: not found in the AWS config files") from None
    return str(region) if region else FALLBACK_REGION


# Adaptive retry backs off on ThrottlingException and 5xx without us writing a retry loop.
RETRY_CONFIG = Config(retries={"mode": "adaptive", "max_attempts": 8}, connect_timeout=5, read_timeout=30)


def session(profile: str | None = None, region: str | None = None) -> boto3.Session:
    return boto3.Session(profile_name=profile, region_name=region)


def sagemaker_client(
    profile: str | None = None, region: str | None = None, endpoint_url: str | None = None, **kw: Any
) -> SageMakerClient:
    sess = session(profile, region)
    client = sess.client("sagemaker", endpoint_url=endpoint_url, config=kw.pop("config", RETRY_CONFIG), **kw)
    return answers.watch(client)  # answers checked before botocore parses them; unknown members kept in sight


def s3_client(profile: str | None = None, region: str | None = None) -> S3Client:
    return session(profile, region).client("s3", config=RETRY_CONFIG)
