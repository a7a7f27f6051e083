"""``hyperpod-scheduler dashboard``: serve the web dashboard over the config and state store."""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from hyperpod_scheduler.cli.output import console
from hyperpod_scheduler.errors import UsageError

if TYPE_CHECKING:
    from hyperpod_scheduler.app.compose import Source

DEFAULT_TOKEN_ENV = "HYPERPOD_SCHEDULER_DASHBOARD_TOKEN"


def token_from_env(var: str) -> str | None:
    """The access token from ``var`` (never a CLI argument: it would show in ``ps``); None: read-only."""
    if not var or not var.replace("_", "").isalnum():
        raise UsageError(f"--token-env: {var!r} is not an environment variable name")
    value = os.environ.get(var, "").strip()
    if value and len(value) < 12:
        raise UsageError(f"--token-env: ${var} is {len(value)} characters; use at least 12")
    return value or None


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: any free one), or one line saying why it cannot be:
    checked before the URL is printed, and handed to the server so nothing else takes the port."""
    if re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise UsageError(f"--host {host}: not an IPv4 address") from None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(f"--host {host}: not an address or host name this machine knows ({why})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise UsageError(f"--host {host} --port {port}: cannot listen there: {exc.strerror or exc}") from None
    return sock


# How long the dashboard reuses the pushed fleet config and the targets' assumed roles (they last 30 min).
FLEET_SOURCE_TTL_S = 300.0


def fleet_sources(location: str, state: str | None) -> Callable[[], Source]:
    """The fleet's source for each request, re-read every few minutes: a push shows without a restart and
    the assumed roles never outlive their credentials. The first read is now: a bad one is one line."""
    from hyperpod_scheduler.cli.fleet_source import fleet_source

    held: list[tuple[float, Source]] = [(time.monotonic(), fleet_source(location, state))]

    def source() -> Source:
        at, src = held[0]
        if time.monotonic() - at > FLEET_SOURCE_TTL_S:
            src = fleet_source(location, state)
            held[0] = (time.monotonic(), src)
        return src

    return source


def register(app: typer.Typer) -> None:
    @app.command()
    def dashboard(
        host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback by default)."),
        port: int = typer.Option(8080, "--port", min=0, max=65535, help="Port (0: any free port)."),
        config: str | None = typer.Option(None, "--config", "-c", help="Config file (schedules are edited here)."),
        state: str | None = typer.Option(
            None, "--state", help="State store: a SQLite path, sqlite:///path, or memory:."
        ),
        token_env: str = typer.Option(
            DEFAULT_TOKEN_ENV, "--token-env", help="Environment variable holding the access token (unset: read-only)."
        ),
        allow_host: list[str] = typer.Option(
            [],
            "--allow-host",
            help="Also answer requests for this host name (repeatable); loopback, IP addresses and --host always are.",
        ),
    ) -> None:
        """Serve the dashboard: fleet, cluster timelines, savings, schedule grid, and (with a token) actions."""
        from hyperpod_scheduler.cli.fleet_source import is_fleet_location
        from hyperpod_scheduler.config.load import load_config
        from hyperpod_scheduler.config.paths import CONFIG_ENV
        from hyperpod_scheduler.web import Dashboard, create_app
        from hyperpod_scheduler.web.serving import bounded_server

        token = token_from_env(token_env)
        location = config or os.environ.get(CONFIG_ENV)
        if location is not None and is_fleet_location(location):  # the hub's table: the fleet's own view
            dash = Dashboard(state=state, token=token, source=fleet_sources(location, state))
        else:
            load_config(config)  # a bad config is one line now, not an error page later
            dash = Dashboard(config_file=config, state=state, token=token)
        dash.store()
        sock = listening_socket(host, port)
        port = int(sock.getsockname()[1])
        shown = f"[{host}]" if ":" in host else host
        mode = "actions need the token in $" + token_env if token else f"read-only (set ${token_env} to allow actions)"
        console.print(f"dashboard on http://{shown}:{port}/ ({mode})", highlight=False)
        app = create_app(dash, allowed_hosts=[host, *allow_host])
        try:
            with sock:
                bounded_server(app).run(sockets=[sock])  # header time, connections, one-line log
        except KeyboardInterrupt:
            # Ctrl-C is how a dashboard is ended: uvicorn shuts down, then raises the signal again.
            pass
        finally:
            dash.close()
