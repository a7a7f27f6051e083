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
from botocore.exceptions import ConnectionError as BotoConnectionError
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


# Adaptive retry backs off on ThrottlingException and 5xx without us writing a retry loop; mutating
# calls are kept from blind retries by ``no_blind_retries`` (applied by ``sagemaker_client`` and the engine).
RETRY_CONFIG = Config(retries={"mode": "adaptive", "max_attempts": 8}, connect_timeout=5, read_timeout=30)

# Calls that change a cluster. A retry is only safe when the first attempt surely did not apply.
MUTATING_OPERATIONS = (
    "CreateCluster",
    "UpdateCluster",
    "DeleteCluster",
    "UpdateClusterSoftware",
    "BatchAddClusterNodes",
    "BatchDeleteClusterNodes",
)
_MARK = "_hyperpod_scheduler_no_blind_retries"


def _veto_unknown_outcomes(response: Any = None, caught_exception: Any = None, **_: Any) -> bool | None:
    """A ``needs-retry`` handler for mutating calls: False (do not retry) when the first attempt may
    have been applied; None (let botocore's own retry policy decide) when it surely was not.

    A connection never made (refused, connect timeout) and a refusal such as ThrottlingException did
    not reach or change the cluster, so they may be retried. A 5xx, a read timeout or a connection
    closed mid-answer may follow an applied update: the caller decides from the cluster's target counts.
    """
    if caught_exception is not None:
        return None if isinstance(caught_exception, BotoConnectionError) else False
    if response is not None:
        http = response[0]
        if getattr(http, "status_code", 0) >= 500:
            return False
    return None


def no_blind_retries(client: Any) -> Any:
    """Register the veto on ``client`` (any boto3 SageMaker client; once per client) and return it.

    botocore calls the handlers of the most specific event first and takes the first answer that is not
    None, so a False here wins over the retry handler of standard and adaptive modes alike."""
    meta = getattr(client, "meta", None)
    if meta is None or not hasattr(meta, "events") or getattr(meta, _MARK, False):
        return client  # a test double without botocore's event system has no retries to veto
    service = meta.service_model.service_id.hyphenize()
    for operation in MUTATING_OPERATIONS:
        meta.events.register_first(
            f"needs-retry.{service}.{operation}",
            _veto_unknown_outcomes,
            unique_id=f"hyperpod-scheduler-no-blind-retry-{operation}",
        )
    setattr(meta, _MARK, True)
    return client


def session(profile: str | None = None, region: str | None = None) -> boto3.Session:
    return boto3.Session(profile_name=profile, region_name=region)


def sagemaker_client(
    profile: str | None = None, region: str | None = None, endpoint_url: str | None = None, **kw: Any
) -> SageMakerClient:
    sess = session(profile, region)
    client = sess.client("sagemaker", endpoint_url=endpoint_url, config=kw.pop("config", RETRY_CONFIG), **kw)
    # Answers checked before botocore parses them (unknown members kept in sight); mutating calls
    # never retried blind.
    result: SageMakerClient = no_blind_retries(answers.watch(client))
    return result


def s3_client(profile: str | None = None, region: str | None = None) -> S3Client:
    return session(profile, region).client("s3", config=RETRY_CONFIG)
