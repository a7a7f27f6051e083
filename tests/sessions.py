"""boto3 sessions for tests: each its own (credentials, events), all reading the process's shared
service models, since a session per test would decode the 14 MiB SageMaker model again each time
(a quarter of a second)."""

from __future__ import annotations

import boto3

from hyperpod_scheduler.aws.model import botocore_session


def shared_session(region_name: str = "us-east-1", key: str = "t", secret: str = "t") -> boto3.Session:
    return boto3.Session(
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        region_name=region_name,
        botocore_session=botocore_session(),
    )
