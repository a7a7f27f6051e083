"""Create a cluster from a checked spec: optionally upload its lifecycle scripts first."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from hyperpod_scheduler.cluster.check import SpecReport
from hyperpod_scheduler.cluster.legacy import FILE_NAME, provisioning_parameters
from hyperpod_scheduler.cluster.upload import Plan, Uploaded, upload_scripts
from hyperpod_scheduler.errors import MalformedAnswer
from hyperpod_scheduler.inputs.text import quoted

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient


def create_cluster(
    report: SpecReport,
    client: SageMakerClient,
    *,
    s3: S3Client | None = None,
    scripts: Path | None = None,
    on_upload: Callable[[Uploaded], None] = lambda _: None,
    hidden: bool = False,
    on_plan: Callable[[Plan], None] = lambda _: None,
) -> str:
    """Upload ``scripts`` (with provisioning_parameters.json for the legacy topology), then CreateCluster.

    Clients are passed in, so tests can use moto and a Stubber. Returns the new cluster's ARN.
    """
    report.raise_for_errors()
    if scripts is not None:
        if s3 is None:
            raise ValueError("scripts given without an S3 client")
        extra = {FILE_NAME: provisioning_parameters(report.spec)} if report.spec.topology != "api" else None
        for uploaded in upload_scripts(s3, report.request, scripts, extra, hidden=hidden, on_plan=on_plan):
            on_upload(uploaded)
    answer = client.create_cluster(**report.request)
    arn = answer.get("ClusterArn") if isinstance(answer, Mapping) else None
    if not isinstance(arn, str) or not arn:
        # The cluster may well be being created: say so, rather than fail on the missing member.
        raise MalformedAnswer(
            f"CreateCluster answer: no ClusterArn (got {quoted(arn)}); the cluster "
            f"{quoted(report.request.get('ClusterName'))} may still be being created: check with `cluster describe`"
        )
    return arn
