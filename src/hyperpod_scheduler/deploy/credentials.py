"""Credentials for one target account: STS AssumeRole from the hub into the spoke role."""

from __future__ import annotations

import re
from typing import Any

import boto3
import botocore.session
from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.aws.deadlines import BoundedBotocoreSession
from hyperpod_scheduler.aws.model import share_models
from hyperpod_scheduler.errors import AwsError

SESSION_PREFIX = "hyperpod-scheduler"
# Longer than a worker may run (the Lambda timeout is at most 900 s, checkpoint waits included), so
# the credentials outlive every call of the run; the spoke role allows up to an hour.
SESSION_SECONDS = 1800


def _botocore_session() -> botocore.session.Session:
    """A fresh bounded botocore session (its own credentials; every client gets the call deadlines and
    answer checks) reading the process's one copy of each service model (``aws.model.share_models``):
    every worker run of a warm Lambda would otherwise decode the SageMaker model again (about 0.4 s of
    CPU), and two spokes at once would each decode their own."""
    return share_models(BoundedBotocoreSession())


def session_name(account: str, region: str) -> str:
    """A RoleSessionName CloudTrail shows in the target account: which worker did it."""
    name = f"{SESSION_PREFIX}-{account}-{region}"
    return re.sub(r"[^\w+=,.@-]", "-", name)[:64]


def assume(sts: Any, role_arn: str, account: str, region: str) -> boto3.Session:
    """A boto3 session acting as ``role_arn`` (one-line AwsError if the hub may not assume it)."""
    try:
        answer = sts.assume_role(
            RoleArn=role_arn, RoleSessionName=session_name(account, region), DurationSeconds=SESSION_SECONDS
        )
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise AwsError(
            f"account {account}: cannot assume {role_arn}: {err.get('Code', 'Error')}: {err.get('Message', '')} "
            "(is the spoke stack deployed with this hub's account as trusted?)"
        ) from None
    except BotoCoreError as exc:
        raise AwsError(f"account {account}: cannot assume {role_arn}: {exc}") from None
    creds = answer["Credentials"]
    return boto3.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=region,
        botocore_session=_botocore_session(),  # every client of the spoke: deadlines and answer checks
    )
