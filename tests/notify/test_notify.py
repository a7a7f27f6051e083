"""Notifications reach SNS (moto) and a Slack-compatible webhook (a local HTTP server); secrets stay secret."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import boto3
import pytest
from moto import mock_aws

from hyperpod_scheduler.config.model import Notifications
from hyperpod_scheduler.engine.events import Event
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.notify.channels import Notifier, SnsChannel, WebhookChannel, channels_from
from tests.served import SHUTDOWN_POLL_S

AT = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
BLOCKED = Event(AT, "p5-training", "blocked", "stop blocked: checkpoints: job 42 keeps checkpoints on /opt/dlami/nvme")
FAILED = Event(AT, "p5-training", "failed", "start did not settle: p5-workers partial 2/4")


class _Hook(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        type(self).received.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def webhook() -> Iterator[str]:
    _Hook.received = []
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/services/T000/B000/SECRET-TOKEN"
    server.shutdown()


def test_webhook_gets_blocked_and_failed_but_not_routine_events(webhook: str) -> None:
    notifier = Notifier([WebhookChannel(webhook, allow_loopback=True)])
    notifier(Event(AT, "c", "settled", "stop settled"))
    notifier(BLOCKED)
    notifier(FAILED)
    notifier.close()
    texts = [m["text"] for m in _Hook.received]
    assert len(texts) == 2
    assert "stop blocked" in texts[0] and "/opt/dlami/nvme" in texts[0]
    assert "start shortfall" in texts[1] and "partial 2/4" in texts[1]


@mock_aws
def test_sns_topic_receives_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    sns = boto3.client("sns", region_name="us-east-1")
    sqs = boto3.client("sqs", region_name="us-east-1")
    topic = sns.create_topic(Name="hyperpod-alerts")["TopicArn"]
    queue = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    notifier = Notifier([SnsChannel(topic, sns)])
    notifier(BLOCKED)
    notifier.close()
    messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    body = json.loads(messages[0]["Body"])
    assert body["Subject"] == "hyperpod-scheduler: p5-training: stop blocked"
    assert "job 42" in body["Message"]


def test_a_broken_channel_is_reported_without_the_url_and_never_raises() -> None:
    errors: list[str] = []
    url = "http://127.0.0.1:9/hooks/SECRET-TOKEN"  # discard port: nothing listens
    # Short pauses between its three attempts (the default 1 s and 4 s made this a 5 s wait): the subject is
    # what is reported, not the backoff (tests/notify/test_webhooks.py holds the retries and their pauses).
    channel = WebhookChannel(url, timeout_s=2, allow_loopback=True)
    notifier = Notifier([channel], on_error=errors.append, backoff_s=(0.05,))
    notifier(BLOCKED)
    notifier.close()
    assert errors and "webhook" in errors[0]
    assert "SECRET-TOKEN" not in errors[0] and "SECRET-TOKEN" not in repr(notifier.channels[0])


def test_channels_from_config_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPERPOD_SCHEDULER_WEBHOOK_URL", "https://hooks.example.invalid/x")
    chans = channels_from(Notifications(), lambda region: None)  # type: ignore[arg-type,return-value]
    assert [c.name for c in chans] == ["webhook"]
    monkeypatch.setenv("HYPERPOD_SCHEDULER_WEBHOOK_URL", "http://hooks.example.invalid/T0/SECRET-TOKEN")
    with pytest.raises(UsageError, match=r"\$HYPERPOD_SCHEDULER_WEBHOOK_URL: must be an https:// URL") as refused:
        channels_from(Notifications(), lambda region: None)  # type: ignore[arg-type,return-value]
    assert "SECRET-TOKEN" not in str(refused.value)
    monkeypatch.delenv("HYPERPOD_SCHEDULER_WEBHOOK_URL")
    assert channels_from(Notifications(), lambda region: None) == []  # type: ignore[arg-type,return-value]


def test_sns_client_is_built_in_the_topic_region() -> None:
    regions: list[str | None] = []
    settings = Notifications(sns_topic_arn="arn:aws:sns:eu-west-1:123456789012:alerts")
    channels_from(settings, lambda region: regions.append(region))  # type: ignore[arg-type,func-returns-value]
    assert regions == ["eu-west-1"]
