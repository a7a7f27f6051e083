"""Where notifications go. The webhook URL is a secret (it authorises posting): never log or store it."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from hyperpod_scheduler.config.model import Notifications
from hyperpod_scheduler.engine.events import Event, Sink

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient

SNS_ENV = "HYPERPOD_SCHEDULER_SNS_TOPIC_ARN"
WEBHOOK_ENV = "HYPERPOD_SCHEDULER_WEBHOOK_URL"
# The events worth waking someone for.
NOTIFY_KINDS = frozenset({"blocked", "failed", "refused", "drift"})
_SUBJECTS = {"blocked": "stop blocked", "refused": "update refused", "drift": "AMI changed"}


@dataclass(frozen=True)
class Message:
    subject: str
    text: str


class Channel(Protocol):
    name: str

    def send(self, message: Message) -> None: ...


class SnsChannel:
    name = "sns"

    def __init__(self, topic_arn: str, client: SNSClient) -> None:
        self.topic_arn = topic_arn
        self.client = client

    def send(self, message: Message) -> None:
        self.client.publish(TopicArn=self.topic_arn, Subject=message.subject[:100], Message=message.text)


class WebhookChannel:
    """A Slack-compatible incoming webhook: POST {"text": ...} as JSON."""

    name = "webhook"

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self._url = url
        self.timeout_s = timeout_s

    def __repr__(self) -> str:
        return "WebhookChannel(url=<redacted>)"

    def send(self, message: Message) -> None:
        body = json.dumps({"text": f"*{message.subject}*\n{message.text}"}).encode()
        request = urllib.request.Request(self._url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            response.read()


def message_for(event: Event) -> Message | None:
    if event.kind not in NOTIFY_KINDS:
        return None
    what = _SUBJECTS.get(event.kind) or ("start shortfall" if "start" in event.message else "failed")
    return Message(f"hyperpod-scheduler: {event.cluster}: {what}", f"{event.at.isoformat()} {event.message}")


class Notifier:
    """An event sink that forwards notify-worthy events to every channel; a broken channel is reported
    through ``on_error`` and never stops the scheduler."""

    def __init__(
        self, channels: list[Channel], on_error: Callable[[str], None] = lambda _: None, forward: Sink | None = None
    ) -> None:
        self.channels = channels
        self.on_error = on_error
        self.forward = forward

    def __call__(self, event: Event) -> None:
        if self.forward is not None:
            self.forward(event)
        message = message_for(event)
        if message is None:
            return
        for channel in self.channels:
            try:
                channel.send(message)
            except Exception as exc:  # report the kind only: a URL or payload may carry a secret
                self.on_error(f"notification via {channel.name} failed: {type(exc).__name__}")


def topic_region(topic_arn: str) -> str | None:
    """arn:aws:sns:REGION:ACCOUNT:NAME -> REGION (the topic's region, whatever the default region is)."""
    parts = topic_arn.split(":")
    return parts[3] if len(parts) >= 6 and parts[2] == "sns" and parts[3] else None


def channels_from(settings: Notifications, sns_client: Callable[[str | None], SNSClient]) -> list[Channel]:
    """Channels from config, then the environment (config wins). ``sns_client(region)`` builds the client."""
    out: list[Channel] = []
    topic = settings.sns_topic_arn or os.environ.get(SNS_ENV)
    if topic:
        out.append(SnsChannel(topic, sns_client(topic_region(topic))))
    url = settings.webhook_url or os.environ.get(WEBHOOK_ENV)
    if url:
        out.append(WebhookChannel(url))
    return out
