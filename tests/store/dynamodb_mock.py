"""A moto DynamoDB table for the store contract and the deploy tests.

Real DynamoDB serialises conditional writes to one item; moto handles concurrent requests without a
lock, so two threads could both pass one condition check. The mock serialises moto's request
handling to stand in for the service (the store's own code runs unlocked and concurrently).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import boto3
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber

from hyperpod_scheduler.store.dynamodb import DynamoDBStore, create_table

DYNAMODB_TABLE = "hyperpod-scheduler-test"
REGION = "us-east-1"

_service_lock = threading.RLock()
_original = BotocoreStubber.process_request


def _serialised(self: BotocoreStubber, request: Any) -> Any:
    with _service_lock:
        return _original(self, request)


@contextmanager
def mocked_aws() -> Iterator[None]:
    """moto for every AWS service, with fake credentials and one request at a time."""
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}
    with (
        mock.patch.dict(os.environ, env),
        mock.patch.object(BotocoreStubber, "process_request", _serialised),
        mock_aws(),
    ):
        yield


@contextmanager
def mocked_dynamodb(table: str = DYNAMODB_TABLE) -> Iterator[None]:
    with mocked_aws():
        create_table(boto3.client("dynamodb", region_name=REGION), table)
        yield


def clear_table(table: str = DYNAMODB_TABLE) -> None:
    """Delete every item of ``table`` (a shared table between tests: each starts from an empty one)."""
    client = boto3.client("dynamodb", region_name=REGION)
    keys = [k["AttributeName"] for k in client.describe_table(TableName=table)["Table"]["KeySchema"]]
    for page in client.get_paginator("scan").paginate(TableName=table, ProjectionExpression=", ".join(keys)):
        for item in page["Items"]:
            client.delete_item(TableName=table, Key={k: item[k] for k in keys})
    assert client.scan(TableName=table, Select="COUNT")["Count"] == 0


def open_dynamodb(table: str = DYNAMODB_TABLE) -> DynamoDBStore:
    return DynamoDBStore(table, client=boto3.client("dynamodb", region_name=REGION))
