"""Slack-compatible webhook text (notify/webhook.slack_text): outside text is shown as written, never as
Slack markup, and only the project's own approval link is a link. Any Slurm user names the jobs and
writes the ``ckpt:`` comments that reach these messages."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import pytest

from hyperpod_scheduler.engine.events import Event
from hyperpod_scheduler.notify.channels import Notifier, WebhookChannel, message_for
from hyperpod_scheduler.notify.webhook import slack_text
from tests.served import SHUTDOWN_POLL_S

AT = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
DISGUISED = "<https://evil.example/approve|Approve the release here>"
LINK = "https://ops.example/hps/clusters/p5/approvals/ab12?t=TOKEN-x_y"
HOSTILE = [
    f"stop blocked: checkpoints: job 42 '<!channel> {DISGUISED}' keeps checkpoints on /opt/dlami/nvme",
    "stop blocked: job <!here> ckpt: 'wait for <@U024BE7LH> & <!subteam^SAZ94GDB8>'",
    "AWS UpdateCluster failed: ValidationException: <https://evil.example|see console> &amp; more",
]


def _links(text: str) -> list[str]:
    """What Slack would read as links, mentions or commands: every <...> left in the text."""
    return re.findall(r"<[^<>]*>", text)


@pytest.mark.parametrize("said", HOSTILE)
def test_outside_text_in_a_slack_message_is_escaped_never_markup(said: str) -> None:
    message = message_for(Event(AT, "p5-<!channel>", "blocked", said))
    assert message is not None
    text = slack_text(message)
    assert _links(text) == []
    assert "<!channel>" not in text and "&lt;!channel&gt;" in text
    # Shown as written: unescaping gives back exactly what was said.
    shown = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert said in shown and "p5-<!channel>" in shown


def test_the_approval_link_is_the_only_link_beside_a_disguised_one() -> None:
    event = Event(AT, "p5", "approval", f"approval needed: job '{DISGUISED}' runs", private=LINK)
    message = message_for(event)
    assert message is not None
    text = slack_text(message)
    assert _links(text) == [f"<{LINK}>"]
    assert "&lt;https://evil.example/approve|Approve the release here&gt;" in text
    assert LINK in message.plain() and "&lt;" not in message.plain()  # SNS gets plain text


def test_a_link_target_cannot_end_itself_early() -> None:
    event = Event(AT, "p5", "approval", "approval needed", private="https://ops.example/a|b>c<d&e")
    message = message_for(event)
    assert message is not None
    assert _links(slack_text(message)) == ["<https://ops.example/a%7Cb%3Ec%3Cd&amp;e>"]


class _Hook(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        type(self).received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def webhook() -> Iterator[str]:
    _Hook.received = []
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/services/T000/B000/SECRET"
    server.shutdown()


def test_what_the_webhook_receives_pings_nobody(webhook: str) -> None:
    notifier = Notifier([WebhookChannel(webhook, allow_loopback=True)])
    notifier(Event(AT, "p5", "blocked", HOSTILE[0]))
    notifier(Event(AT, "p5", "approval", f"approval needed: '{DISGUISED}'", private=LINK))
    notifier.close()
    texts = [m["text"] for m in _Hook.received]
    assert len(texts) == 2
    assert _links(texts[0]) == [] and _links(texts[1]) == [f"<{LINK}>"]
