"""A fleet under test: moto for DynamoDB, STS, SQS, S3 and SNS; one emulator per account for SageMaker.

The emulator namespaces clusters by region (from the SigV4 credential scope) but serves one account
per process, so each account gets its own emulator, serving that account (the worker checks each
cluster's ARN against its target's account). The SageMaker client factory finds the emulator
through the credentials the worker hands it: moto's STS answers GetCallerIdentity for an assumed
role with the role's account, so a worker that assumed the wrong role reaches the wrong emulator.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from hyperpod_scheduler.config.model import SCHEDULE_TAG
from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.deploy.handlers import Runtime
from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.store.dynamodb import DynamoDBStore, create_table
from tests.engine.conftest import three_tier_request
from tests.reliability.harness import account_emulator
from tests.sessions import shared_session
from tests.store.dynamodb_mock import REGION, mocked_aws

START = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)  # a Monday, before office hours
TABLE = "hps-state"
ACCOUNTS = ("111111111111", "222222222222", "333333333333")
REGIONS = ("us-east-1", "eu-west-1")
OFFICE = "Mon-Fri 08:00-18:00 UTC"
SIZES = {"controller": 1, "dev": 2, "train": 3}


def fleet_yaml(accounts: tuple[str, ...] = ACCOUNTS, regions: tuple[str, ...] = REGIONS) -> str:
    """Every target governs 'train' by name; us-east-1 targets also find tagged clusters."""
    lines = ["schedules:", f"  office: {OFFICE}", "defaults:", "  schedule: office", "targets:"]
    for account in accounts:
        for region in regions:
            lines += [f"  - account: '{account}'", f"    region: {region}", "    clusters: [train]"]
            if region == "us-east-1":
                lines.append("    tag_selector: true")
    return "\n".join(lines) + "\n"


class PacedClock:
    """A monotonic clock that only sleeping moves (thread-safe: a worker's turns share it)."""

    def __init__(self) -> None:
        self._at = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._at

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self._at += max(0.0, seconds)


@dataclass
class FleetWorld:
    emulators: dict[str, Emulator]
    out: list[str] = field(default_factory=list)
    updates: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (account, region, cluster)
    _admins: dict[tuple[str, str], Any] = field(default_factory=dict)

    @property
    def now(self) -> datetime:
        return next(iter(self.emulators.values())).clock.now()

    def advance(self, seconds: float) -> None:
        """Every account's clock moves together: the fleet shares one time."""
        for emu in self.emulators.values():
            emu.advance(seconds)

    def advance_to(self, hour: int, minute: int = 0) -> None:
        """Move every clock forward to the next hour:minute of the same day."""
        target = self.now.replace(hour=hour, minute=minute, second=0, microsecond=0)
        assert target > self.now, "already past that time today"
        self.advance((target - self.now).total_seconds())

    def admin(self, account: str, region: str) -> Any:
        # One client per account and region: settle() describes every cluster after each 5 minutes of
        # virtual time, and a new boto3 client a look was most of a fleet test's own time.
        key = (account, region)
        if key not in self._admins:
            self._admins[key] = shared_session(region, "admin", "admin").client(
                "sagemaker", endpoint_url=self.emulators[account].endpoint
            )
        return self._admins[key]

    def sagemaker_for(self, session: boto3.Session, region: str) -> Any:
        account = session.client("sts", region_name=region).get_caller_identity()["Account"]
        client = session.client("sagemaker", region_name=region, endpoint_url=self.emulators[account].endpoint)

        def count(params: dict[str, Any], **_: Any) -> None:
            self.updates[(account, region, params["ClusterName"])] += 1

        client.meta.events.register("provide-client-params.sagemaker.UpdateCluster", count)
        return client

    def runtime(self) -> Runtime:
        # The run's token buckets (deploy.throttle) wait on a clock of their own that their sleeps move:
        # each call still waits its turn, in order, as in production, but no test sleeps for real (the
        # parity tests slept 6.5 s each). tests/deploy/test_throttle.py times the buckets themselves.
        paced = PacedClock()
        return Runtime(
            table=TABLE,
            config_location=config_store.Location("dynamodb", TABLE),
            queue_url=self.queue_url,
            sagemaker_for=self.sagemaker_for,
            now=lambda: self.now,
            out=self.out.append,
            monotonic=paced.now,
            sleep=paced.sleep,
        )

    queue_url: str = ""

    def create(self, account: str, region: str, name: str, *, tagged: bool = False) -> None:
        request = three_tier_request(name)
        if tagged:
            request["Tags"] = [{"Key": SCHEDULE_TAG, "Value": "office"}]
        self.admin(account, region).create_cluster(**request)

    def describe(self, account: str, region: str, name: str) -> dict[str, Any]:
        return dict(self.admin(account, region).describe_cluster(ClusterName=name))

    def counts(self, account: str, region: str, name: str) -> dict[str, int]:
        groups = self.describe(account, region, name)["InstanceGroups"]
        return {g["InstanceGroupName"]: g["CurrentCount"] for g in groups}

    def settle(self, clusters: list[tuple[str, str, str]], limit_s: float = 8 * 3600) -> None:
        waited = 0.0
        while waited <= limit_s:
            if all(self._settled(self.describe(*c)) for c in clusters):
                return
            self.advance(300)
            waited += 300
        raise AssertionError("clusters did not settle")

    @staticmethod
    def _settled(d: dict[str, Any]) -> bool:
        return d["ClusterStatus"] in ("InService", "Failed") and all(
            g["CurrentCount"] == g.get("TargetCount", g["CurrentCount"]) for g in d["InstanceGroups"]
        )

    def log_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out]


@pytest.fixture
def aws() -> Iterator[None]:
    with mocked_aws():
        yield


@pytest.fixture
def world(aws: None) -> Iterator[FleetWorld]:
    create_table(boto3.client("dynamodb", region_name=REGION), TABLE)
    queue_url = boto3.client("sqs", region_name=REGION).create_queue(QueueName="hps-work")["QueueUrl"]
    with ExitStack() as stack:
        emulators = {
            # Each account's clusters carry that account in their ARNs, as on AWS: the worker checks it.
            a: stack.enter_context(account_emulator(a, virtual_start=START, seed=i, in_process=True))
            for i, a in enumerate(ACCOUNTS)
        }
        w = FleetWorld(emulators)
        w.queue_url = queue_url
        yield w


def store() -> DynamoDBStore:
    return DynamoDBStore(TABLE, client=boto3.client("dynamodb", region_name=REGION))


def drain(queue_url: str) -> list[dict[str, Any]]:
    """Every message on the queue as SQS event records (what the event source mapping delivers)."""
    sqs = boto3.client("sqs", region_name=REGION)
    records: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            return records
        for m in got:
            records.append({"messageId": m["MessageId"], "body": m["Body"]})
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
