"""The emulator's HTTP server: a threaded HTTP/1.1 (keep-alive) server on loopback, plus admin endpoints.

One thread per connection (``ThreadingHTTPServer``), so a client that reuses its connection keeps its
thread. AWS API calls are ``POST /`` with ``X-Amz-Target``; everything under ``/_emulator/`` is the
emulator's own control API (health, clock, faults, reset), not AWS's.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Protocol

from hyperpod_scheduler.emulator.clock import Clock, RealClock, VirtualClock
from hyperpod_scheduler.emulator.door import refusal
from hyperpod_scheduler.emulator.errors import EmulatorError, validation
from hyperpod_scheduler.emulator.protocol import AwsJsonApi, Dispatcher, Reply, decode_body, error_reply, json_reply
from hyperpod_scheduler.emulator.storage import Storage
from hyperpod_scheduler.errors import UsageError

log = logging.getLogger(__name__)

ADMIN_PREFIX: Final = "/_emulator/"
MAX_BODY_BYTES: Final = 8 * 1024 * 1024
IDLE_TIMEOUT_SECONDS: Final = 300.0


class ControlledBackend(Dispatcher, Protocol):
    """The backend as the admin endpoints see it (``HyperPodBackend`` fits)."""

    @property
    def clock(self) -> Clock: ...

    def process_due(self) -> Any: ...

    def next_event_time(self) -> datetime | None: ...

    def reset(self) -> Any: ...

    @property
    def omitted_members(self) -> str: ...

    def release_image(
        self, version: str | None = None, image_id: str | None = None, *, security_update: bool = False
    ) -> Any: ...

    def images(self) -> list[dict[str, Any]]: ...

    def latest_image(self) -> str | None: ...

    def add_training_plan(self, name: str, spec: dict[str, Any]) -> Any: ...

    def training_plans(self) -> list[dict[str, Any]]: ...


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


# Who answers: `emulator wait` checks it, so a web server or another tool on the port is never taken for
# the emulator.
IDENTITY: Final = "hyperpod-scheduler-emulator"

ROUTES: Final = ("health", "state", "clock", "faults", "reset", "images", "training-plans")


class AdminApi:
    """``/_emulator/...``: health and state, clock (read; move a virtual one), faults (read; change),
    the AMI catalogue (read; release a new AMI), training plans (read; add one), reset."""

    def __init__(self, backend: ControlledBackend, api: AwsJsonApi, storage: Storage | None = None) -> None:
        self.backend = backend
        self.api = api
        self.storage = storage

    def handle(self, method: str, path: str, body: bytes) -> Reply:
        route = path[len(ADMIN_PREFIX) :].split("?", 1)[0].strip("/")
        try:
            payload = decode_body(body) if method == "POST" else {}
            if route == "health" and method == "GET":
                return json_reply(200, {"status": "ok", "service": IDENTITY, **self._clock_view()})
            if route == "state" and method == "GET":
                return json_reply(200, self._state_view())
            if route == "images" and method == "GET":
                return json_reply(200, {"images": self.backend.images(), "latest": self.backend.latest_image()})
            if route == "images" and method == "POST":
                self._release(payload)
                return json_reply(200, {"images": self.backend.images(), "latest": self.backend.latest_image()})
            if route == "training-plans" and method == "GET":
                return json_reply(200, {"training_plans": self.backend.training_plans()})
            if route == "training-plans" and method == "POST":
                self._add_plan(payload)
                return json_reply(200, {"training_plans": self.backend.training_plans()})
            if route == "clock" and method == "GET":
                return json_reply(200, self._clock_view())
            if route == "clock" and method == "POST":
                self._move_clock(payload)
                return json_reply(200, self._clock_view())
            if route == "faults" and method == "GET":
                return json_reply(200, self.api.faults.as_dict())
            if route == "faults" and method == "POST":
                self.api.faults.update(payload)
                return json_reply(200, self.api.faults.as_dict())
            if route == "reset" and method == "POST":
                self.backend.reset()
                if self.storage is not None:
                    self.storage.clear()
                return json_reply(200, {"status": "reset"})
            stored = self.storage.admin(method, route, payload) if self.storage is not None else None
            if stored is not None:
                return stored
            if route in ROUTES:
                return error_reply(EmulatorError("MethodNotAllowed", f"{method} is not allowed on {path}", 405))
            return error_reply(EmulatorError("NotFound", f"no emulator admin endpoint {path}", 404))
        except UsageError as exc:
            return error_reply(validation(str(exc)))
        except EmulatorError as exc:
            return error_reply(exc)

    def _state_view(self) -> dict[str, Any]:
        return {
            **self._clock_view(),
            "omitted_members": self.backend.omitted_members,
            "check_answers": self.api.check_answers,
            "latest_image": self.backend.latest_image(),
            "faults": self.api.faults.as_dict(),
        }

    def _release(self, payload: dict[str, Any]) -> None:
        known = {"version", "image_id", "security_update"}
        unknown = sorted(set(payload) - known)
        if unknown:
            raise validation(f"images: unknown field {unknown[0]!r} (known: {', '.join(sorted(known))})")
        version, image_id, security = payload.get("version"), payload.get("image_id"), payload.get("security_update")
        if version is not None and not isinstance(version, str):
            raise validation(f"images: version must be a string like 1.2.3, got {version!r}")
        if image_id is not None and not isinstance(image_id, str):
            raise validation(f"images: image_id must be a string like ami-0123456789abcdef0, got {image_id!r}")
        if security is not None and not isinstance(security, bool):
            raise validation(f"images: security_update must be true or false, got {security!r}")
        self.backend.release_image(version, image_id, security_update=bool(security))

    def _add_plan(self, payload: dict[str, Any]) -> None:
        name = payload.get("name")
        if not isinstance(name, str):
            raise validation(
                'training-plans: send {"name": NAME, "instance_type": ..., "count": ..., "start": ..., ...}'
            )
        self.backend.add_training_plan(name, {k: v for k, v in payload.items() if k != "name"})

    def _clock_view(self) -> dict[str, Any]:
        clock = self.backend.clock
        return {
            "now": _iso(clock.now()),
            "virtual": isinstance(clock, VirtualClock),
            "paused": isinstance(clock, RealClock) and clock.paused,
            "next_event": _iso(self.backend.next_event_time()),
        }

    def _move_clock(self, payload: dict[str, Any]) -> None:
        clock = self.backend.clock
        if isinstance(clock, RealClock) and "pause" in payload:
            if not isinstance(payload["pause"], bool):
                raise validation(f"pause must be true or false, got {payload['pause']!r}")
            if payload["pause"]:
                clock.pause()
            else:
                clock.resume()
            return
        if not isinstance(clock, VirtualClock):
            raise validation(
                'the emulator runs on a real-time clock: it can only be paused ({"pause": true}) and resumed'
            )
        if "advance_seconds" in payload:
            seconds = payload["advance_seconds"]
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
                raise validation(f"advance_seconds must be a number of seconds >= 0, got {seconds!r}")
            clock.advance(float(seconds))
        elif "set" in payload:
            try:
                clock.set(_parse_instant(payload["set"]))
            except ValueError as exc:  # the virtual clock never goes backwards
                raise validation(f"set: {exc}") from None
        else:
            raise validation('clock: send {"advance_seconds": N} or {"set": "<ISO 8601 time>"}')
        self.backend.process_due()


def _parse_instant(value: Any) -> datetime:
    if not isinstance(value, str):
        raise validation(f"set must be an ISO 8601 string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise validation(f"set: {value!r} is not an ISO 8601 time") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def route(api: AwsJsonApi, admin: AdminApi, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
    """The answer to one request, whatever carried it: the HTTP handler below, or ``in_process`` (botocore
    in the same process, without the socket). ``headers`` as the client sent them (names as written)."""
    if path.startswith(ADMIN_PREFIX) and method in ("GET", "POST"):
        return admin.handle(method, path, body)
    stored = admin.storage.handle(method, path, headers, body) if admin.storage is not None else None
    if stored is not None:
        return stored
    if method == "POST":
        return api.handle(_header(headers, "X-Amz-Target"), body, _header(headers, "Authorization"))
    if method == "GET":
        message = "AWS API calls are POST / with an X-Amz-Target header"
        return error_reply(EmulatorError("UnknownOperationException", message, 400))
    return error_reply(EmulatorError("MethodNotAllowed", f"{method} {path} is not served here", 405))


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """A header's value, its name in any case (as HTTP has it)."""
    wanted = name.lower()
    return next((v for k, v in headers.items() if k.lower() == wanted), None)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
    server_version = "HyperPodEmulator"
    sys_version = ""
    disable_nagle_algorithm = True  # headers and body go out as separate writes; don't wait for ACKs
    timeout = IDLE_TIMEOUT_SECONDS
    server: _HttpServer

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, add=False)

    def _refused(self) -> bool:
        """The door (emulator/door.py): Host, Origin and browser-shaped POSTs, before anything is read."""
        headers = {name.title(): value for name, value in self.headers.items()}  # Host, Origin, Content-Type
        why = refusal(self.command, headers, self.server.served_host, int(self.server.server_address[1]))
        if why is None:
            return False
        self.close_connection = True
        self._send(error_reply(EmulatorError("AccessDeniedException", why, 403 if "Host" not in why else 421)))
        return True

    def do_POST(self) -> None:
        if self._refused():
            return
        body = self._read_body()
        if body is not None:
            self._answer("POST", body)

    def do_GET(self) -> None:
        if not self._refused():
            self._answer("GET", b"")

    # S3's REST verbs (the storage beside the control plane answers them; see storage.py).
    def do_PUT(self) -> None:
        if self._refused():
            return
        body = self._read_body()
        if body is not None:
            self._answer("PUT", body)

    def do_HEAD(self) -> None:
        if not self._refused():
            self._answer("HEAD", b"")

    def do_DELETE(self) -> None:
        if not self._refused():
            self._answer("DELETE", b"")

    def _answer(self, method: str, body: bytes) -> None:
        headers = {k: v for k, v in self.headers.items()}
        self._send(route(self.server.api, self.server.admin, method, self.path, headers, body))

    def _read_body(self) -> bytes | None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self._refuse(411, "chunked request bodies are not supported; send Content-Length")
            return None
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self._refuse(400, "Content-Length is not a number")
            return None
        if length < 0 or length > MAX_BODY_BYTES:
            self._refuse(413, f"request body of {length} bytes is out of range (max {MAX_BODY_BYTES})")
            return None
        return self.rfile.read(length) if length else b""

    def _refuse(self, status: int, message: str) -> None:
        self.close_connection = True  # the rest of the stream cannot be trusted
        self._send(error_reply(EmulatorError("SerializationException", message, status)))

    def _send(self, reply: Reply) -> None:
        if reply.delay_seconds > 0:
            time.sleep(reply.delay_seconds)
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        if not any(name.lower() == "content-length" for name, _ in reply.headers):
            self.send_header("Content-Length", str(len(reply.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":  # a HEAD answer has the headers of a GET and no body
            self.wfile.write(reply.body)

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        # Per-request access lines on stderr would cost more than the request itself.
        log.debug("%s " + format, self.address_string(), *args)


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True  # a client that never closes its connection must not block exit
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], family: int, api: AwsJsonApi, admin: AdminApi) -> None:
        self.address_family = family
        self.served_host = address[0]
        self.api = api
        self.admin = admin
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        self._wake_read, self._wake_write = socket.socketpair()  # before: a failed bind calls server_close
        self._stopping = threading.Event()
        super().__init__(address, _Handler)

    def serve_until_stopped(self) -> None:
        """Accept and hand off connections until ``stop``. socketserver's ``serve_forever`` sees its
        shutdown request only between polls (every ``poll_interval``), so each close of an emulator waited
        up to one interval; this loop also watches a socket ``stop`` writes to, and ends at once."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.socket, selectors.EVENT_READ)
            selector.register(self._wake_read, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in selector.select():
                    if key.fileobj is self.socket and not self._stopping.is_set():
                        self._accept_one()

    def _accept_one(self) -> None:
        # What socketserver's _handle_request_noblock does, through its public methods.
        try:
            request, client_address = self.get_request()
        except OSError:
            return
        if not self.verify_request(request, client_address):
            self.shutdown_request(request)
            return
        try:
            self.process_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
            self.shutdown_request(request)
        except BaseException:
            self.shutdown_request(request)
            raise

    def stop(self) -> None:
        """End ``serve_until_stopped`` at once (from another thread)."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._wake_write.send(b"x")

    def server_close(self) -> None:
        super().server_close()
        self._wake_read.close()
        self._wake_write.close()

    def track(self, conn: socket.socket, *, add: bool) -> None:
        with self._connections_lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def drop_connections(self) -> None:
        with self._connections_lock:
            conns = list(self._connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client hanging up mid-request is normal (benchmarks, killed tests); log, don't print tracebacks.
        log.debug("emulator: connection from %s ended with an error", client_address, exc_info=True)


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class EmulatorServer:
    """The HTTP server around an ``AwsJsonApi``; ``start()`` serves from a background thread."""

    def __init__(self, api: AwsJsonApi, admin: AdminApi, host: str = "127.0.0.1", port: int = 0) -> None:
        self._http = _HttpServer((host, port), _family(host), api, admin)
        self._thread: threading.Thread | None = None
        self.host = host

    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    @property
    def endpoint(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def serve(self, api: AwsJsonApi, admin: AdminApi) -> None:
        """Answer from ``api`` and ``admin`` from the next request on (``Emulator.renew``)."""
        self._http.api, self._http.admin = api, admin

    def start(self) -> None:
        self._thread = threading.Thread(target=self._http.serve_until_stopped, name="emulator-http", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop accepting, end open keep-alive connections, release the port. Safe to call twice."""
        if self._thread is not None:
            self._http.stop()
            self._thread.join()
            self._thread = None
        self._http.drop_connections()
        self._http.server_close()
