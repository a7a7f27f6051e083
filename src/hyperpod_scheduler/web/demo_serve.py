"""Serve the dashboard over a finished demo run: its emulator, config and state store, until Ctrl-C.

For ``hyperpod-scheduler demo --dashboard`` (the demo calls ``serve_demo`` before it closes its emulator).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import yaml

from hyperpod_scheduler.aws.clients import AwsClients, plain_client
from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.web.service import Dashboard


def demo_dashboard(emu: Emulator, config: Config, state_path: str, token: str | None) -> Dashboard:
    """A dashboard on the demo's virtual clock and emulator (SageMaker, S3 and FSx alike); the config is
    written beside the store so the schedule grid has a file to save to."""
    config_file = Path(state_path).with_name("hyperpod-scheduler.yaml")
    config_file.write_text(yaml.safe_dump(config.model_dump(mode="json", exclude_defaults=True), sort_keys=False))
    client = plain_client("sagemaker", emu.endpoint)
    return Dashboard(
        config_file=str(config_file),
        state=state_path,
        token=token,
        now=emu.clock.now,
        client_for=lambda ref: client,
        aws=AwsClients(emu.endpoint),
    )


def serve_demo(
    emu: Emulator,
    config: Config,
    state_path: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    token: str | None = None,
    announce: Callable[[str], None] = print,
) -> None:
    """Block serving the dashboard over the demo until interrupted."""
    from hyperpod_scheduler.web.app import create_app
    from hyperpod_scheduler.web.serving import bounded_server

    dash = demo_dashboard(emu, config, state_path, token)
    with socket.socket() as sock:
        # Bind first, so port 0 becomes a real port we can print, then hand the socket to uvicorn.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        port = sock.getsockname()[1]
        announce(f"dashboard: http://{host}:{port}/ (Ctrl-C to stop)" + ("" if token else " read-only"))
        server = bounded_server(create_app(dash, allowed_hosts=[host]))
        try:
            server.run(sockets=[sock])
        finally:
            dash.close()
