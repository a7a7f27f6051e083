"""botocore in this process answered by a running emulator without the socket, as moto answers it.

Every botocore client gets, through botocore's ``creating-client-class`` event, an HTTP session that
looks up each request's ``host:port``: when an emulator of this process serves there and answers in
process, the request goes to the same routing the HTTP server uses (``server.route``: fault
injection, the model check, the backend, the answer shapes) and comes back as an ``AWSResponse``, as
if off the wire; any other request goes to botocore's own HTTP session. Everything around the send is
the client's own: serialising, signing, the ``before-send`` handlers (a test's canned or lost answer
still wins, and then nothing reaches the emulator, as on the wire), whatever wraps the HTTP session
(the product's call deadlines), parsing, the retry handler. Only the socket and the server's thread
are left out, so this is for tests about the scheduler, not the wire: the protocol, fidelity,
round-trip, crash and tour tests use a served emulator only.

(Not a ``before-send`` handler that answers, as moto's does: botocore runs every ``before-send``
handler even after one has answered, so a request a test's own handler answered would reach the
emulator too.)

Any other process, and any client that is not botocore (``urllib``, a browser, a child process), still
reaches the emulator over HTTP: an emulator that answers in process keeps serving.

``install()`` adds the hook to botocore's built-in handlers, so it is in every botocore session
created afterwards; a session made before goes over HTTP, which is slower, never wrong.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import botocore.handlers
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders

from hyperpod_scheduler.emulator.protocol import Reply

Answer = Callable[[str, str, Mapping[str, str], bytes], Reply]  # method, path, headers, body

EVENT: Final = "creating-client-class"
_answering: dict[str, Answer] = {}
_lock = threading.Lock()


class _Raw(io.BytesIO):
    """The body botocore reads from a response, standing in for urllib3's."""

    def stream(self, amt: int = 64 * 1024, decode_content: bool | None = None) -> Iterator[bytes]:
        while chunk := self.read(amt):
            yield chunk

    def release_conn(self) -> None:
        return None


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _body(request: AWSPreparedRequest) -> bytes:
    body = request.body
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    data = body.read()  # a file-like body (S3 uploads): read it, and leave it where a retry expects it
    request.reset_stream()
    return data if isinstance(data, bytes) else str(data).encode()


class InProcessSender:
    """Stands in for a client's ``http_session``: a request to an emulator answering in process is
    answered here, any other goes to the real session (``inner``)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:  # close(), the pools and the rest are the real session's
        return getattr(self._inner, name)

    def send(self, request: AWSPreparedRequest) -> AWSResponse:
        parts = urlsplit(request.url)
        answer = _answering.get(parts.netloc)
        if answer is None:
            sent: AWSResponse = self._inner.send(request)
            return sent
        headers = {str(k): _text(v) for k, v in request.headers.items()}
        if not any(k.lower() == "host" for k in headers):
            headers["Host"] = parts.netloc  # added by urllib3 on the wire; S3's virtual hosts read it
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        reply = answer(str(request.method), path, headers, _body(request))
        if reply.delay_seconds > 0:
            time.sleep(reply.delay_seconds)  # injected latency, as the server adds it
        out = HTTPHeaders()
        for name, value in reply.headers:
            out[name] = value
        if "Content-Length" not in out:
            out["Content-Length"] = str(len(reply.body))
        body = b"" if request.method == "HEAD" else reply.body
        return AWSResponse(request.url, reply.status, out, _Raw(body))


class _AnsweredInProcess:
    """Mixed into every botocore client class: its HTTP session becomes an ``InProcessSender``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        endpoint = getattr(self, "_endpoint", None)
        if endpoint is not None and not isinstance(endpoint.http_session, InProcessSender):
            endpoint.http_session = InProcessSender(endpoint.http_session)


def _add_mixin(base_classes: list[type], **_: Any) -> None:
    if _AnsweredInProcess not in base_classes:
        base_classes.insert(0, _AnsweredInProcess)


def install() -> None:
    """Once per process: every botocore session created from now on gives its clients the sender."""
    with _lock:
        if (EVENT, _add_mixin) not in botocore.handlers.BUILTIN_HANDLERS:
            botocore.handlers.BUILTIN_HANDLERS.append((EVENT, _add_mixin))


def answer_at(netloc: str, answer: Answer) -> None:
    """Answer botocore's requests to ``netloc`` (``127.0.0.1:PORT``) in process from now on."""
    install()
    with _lock:
        _answering[netloc] = answer


def stop_answering(netloc: str) -> None:
    with _lock:
        _answering.pop(netloc, None)


def answered_in_process(url: str) -> bool:
    """Whether botocore's requests to ``url`` are answered in process."""
    return urlsplit(url).netloc in _answering
