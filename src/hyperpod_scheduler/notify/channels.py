"""Where notifications go, delivered off the engine's path. The webhook URL is a secret (it authorises
posting): never log or store it."""

from __future__ import annotations

import atexit
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from hyperpod_scheduler.config.model import Notifications
from hyperpod_scheduler.engine.events import Event, Sink
from hyperpod_scheduler.notify.webhook import WebhookChannel, WebhookError, parse_url

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient

SNS_ENV = "HYPERPOD_SCHEDULER_SNS_TOPIC_ARN"
WEBHOOK_ENV = "HYPERPOD_SCHEDULER_WEBHOOK_URL"
LOOPBACK_ENV = "HYPERPOD_SCHEDULER_WEBHOOK_ALLOW_LOOPBACK"  # tests and local receivers only
# The events worth waking someone for.
NOTIFY_KINDS = frozenset({"blocked", "failed", "refused", "drift", "plan", "approval", "image"})
_SUBJECTS = {
    "blocked": "stop blocked",
    "refused": "update refused",
    "drift": "AMI changed",
    "plan": "training plan",
    "approval": "approval",
    "image": "AMI updated",
}


@dataclass(frozen=True)
class Message:
    """What a notification says. ``subject`` and ``text`` carry outside text (cluster and job names,
    checkpoint comments, AWS messages) as plain text; ``link`` is the project's own link (an approval
    page), kept apart so a channel with markup can make it, and only it, a link."""

    subject: str
    text: str
    link: str = field(default="", repr=False)  # carries the approval token

    def plain(self) -> str:
        """The text as one plain message (SNS, e-mail): the link on a line of its own."""
        return f"{self.text}\nApprove or refuse: {self.link}" if self.link else self.text


class Channel(Protocol):
    name: str

    def send(self, message: Message) -> None: ...


class SnsChannel:
    name = "sns"

    def __init__(self, topic_arn: str, client: SNSClient) -> None:
        self.topic_arn = topic_arn
        self.client = client

    def send(self, message: Message) -> None:
        self.client.publish(TopicArn=self.topic_arn, Subject=message.subject[:100], Message=message.plain())


def message_for(event: Event) -> Message | None:
    if event.kind not in NOTIFY_KINDS:
        return None
    what = _SUBJECTS.get(event.kind) or ("start shortfall" if "start" in event.message else "failed")
    text = f"{event.at.isoformat()} {event.message}"
    # event.private is an approval link: the channel is the only place its token goes.
    return Message(f"hyperpod-scheduler: {event.label}: {what}", text, link=event.private)


class Notifier:
    """An event sink that forwards notify-worthy events to every channel from a background thread.

    The engine calls it while it holds a cluster's lease, so it only queues (a slow receiver never
    stalls a tick); the thread delivers with retries and backoff and ends once nothing has come for a
    while (a dashboard builds one per request); ``close`` (run at exit, and by ``Context.close``) gives
    what is left a deadline. A channel that fails is reported through ``on_error`` by kind only (a URL or
    payload may carry a secret) and never stops the scheduler.
    """

    def __init__(
        self,
        channels: list[Channel],
        on_error: Callable[[str], None] = lambda _: None,
        forward: Sink | None = None,
        *,
        attempts: int = 3,
        backoff_s: tuple[float, ...] = (1.0, 4.0),
        queue_size: int = 100,
        drain_s: float = 20.0,
        idle_s: float = 5.0,
    ) -> None:
        self.channels = channels
        self.on_error = on_error
        self.forward = forward
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.drain_s = drain_s
        self._queue: queue.Queue[Message | None] = queue.Queue(maxsize=queue_size)
        self._dropped = 0
        self.idle_s = idle_s
        self._closing = threading.Event()
        self._started = False
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if self.forward is not None:
            self.forward(event)
        message = message_for(event)
        if message is None or not self.channels:
            return
        with self._lock:
            try:
                self._queue.put_nowait(message)
            except queue.Full:
                self._dropped += 1
            if not self._started:  # a thread (and the drain at exit) only while there is work
                self._started = True
                self._closing.clear()
                threading.Thread(target=self._drain, name="notify", daemon=True).start()
                atexit.register(self.close)

    def _drain(self) -> None:
        while True:
            try:
                message = self._queue.get(timeout=self.idle_s)
            except queue.Empty:
                with self._lock:
                    if self._queue.unfinished_tasks == 0:
                        self._started = False
                        atexit.unregister(self.close)
                        return
                continue
            try:
                if message is None:
                    return
                for channel in self.channels:
                    self._deliver(channel, message)
            finally:
                self._queue.task_done()

    def _deliver(self, channel: Channel, message: Message) -> None:
        for attempt in range(1, self.attempts + 1):
            try:
                channel.send(message)
                return
            except WebhookError as exc:
                why, again = str(exc), exc.retry
            except Exception as exc:  # report the kind only: a URL or payload may carry a secret
                why, again = type(exc).__name__, True
            if not again or attempt == self.attempts or self._closing.is_set():
                tries = f" after {attempt} attempts" if attempt > 1 else ""
                self.on_error(f"notification via {channel.name} failed{tries}: {why}")
                return
            self._closing.wait(self.backoff_s[min(attempt - 1, len(self.backoff_s) - 1)])

    def close(self, timeout_s: float | None = None) -> None:
        """Deliver what is queued within ``timeout_s`` (default ``drain_s``), then report what was not."""
        limit = self.drain_s if timeout_s is None else timeout_s
        end = time.monotonic() + limit
        while self._queue.unfinished_tasks and time.monotonic() < end:
            time.sleep(0.02)
        left = self._queue.unfinished_tasks
        if left:
            self._closing.set()  # no more waiting between retries
            self.on_error(f"{left} notification(s) not delivered within the {limit:g} s drain deadline at exit")
        if self._dropped:
            self.on_error(f"{self._dropped} notification(s) dropped: more than {self._queue.maxsize} were waiting")
            self._dropped = 0
        with self._lock:
            if self._started and not left:
                atexit.unregister(self.close)  # the idle thread ends by itself

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until everything queued so far was delivered or given up (True), or ``timeout_s`` passed."""
        end = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks and time.monotonic() < end:
            time.sleep(0.01)
        return not self._queue.unfinished_tasks


def topic_region(topic_arn: str) -> str | None:
    """arn:aws:sns:REGION:ACCOUNT:NAME -> REGION (the topic's region, whatever the default region is)."""
    parts = topic_arn.split(":")
    return parts[3] if len(parts) >= 6 and parts[2] == "sns" and parts[3] else None


def channels_from(settings: Notifications, sns_client: Callable[[str | None], SNSClient]) -> list[Channel]:
    """Channels from config, then the environment (config wins). ``sns_client(region)`` builds the client.
    A webhook URL that is not https (or loopback, when allowed), or names a private address, is refused
    here with one line that does not quote it."""
    out: list[Channel] = []
    topic = settings.sns_topic_arn or os.environ.get(SNS_ENV)
    if topic:
        out.append(SnsChannel(topic, sns_client(topic_region(topic))))
    loopback = settings.webhook_allow_loopback or os.environ.get(LOOPBACK_ENV, "") in ("1", "true", "yes")
    if settings.webhook_url:
        out.append(WebhookChannel(settings.webhook_url, allow_loopback=loopback))
    elif os.environ.get(WEBHOOK_ENV):
        url = os.environ[WEBHOOK_ENV]
        parse_url(url, allow_loopback=loopback, where=f"${WEBHOOK_ENV}")
        out.append(WebhookChannel(url, allow_loopback=loopback))
    return out
