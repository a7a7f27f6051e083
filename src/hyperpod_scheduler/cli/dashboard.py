"""``hyperpod-scheduler dashboard``: serve the web dashboard over the config and state store."""

from __future__ import annotations

import os
import socket

import typer

from hyperpod_scheduler.cli.output import console
from hyperpod_scheduler.errors import UsageError

DEFAULT_TOKEN_ENV = "HYPERPOD_SCHEDULER_DASHBOARD_TOKEN"


def token_from_env(var: str) -> str | None:
    """The access token from ``var`` (never a CLI argument: it would show in ``ps``); None: read-only."""
    if not var or not var.replace("_", "").isalnum():
        raise UsageError(f"--token-env: {var!r} is not an environment variable name")
    value = os.environ.get(var, "").strip()
    if value and len(value) < 12:
        raise UsageError(f"--token-env: ${var} is {len(value)} characters; use at least 12")
    return value or None


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


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
    ) -> None:
        """Serve the dashboard: fleet, cluster timelines, savings, schedule grid, and (with a token) actions."""
        import uvicorn

        from hyperpod_scheduler.config.load import load_config
        from hyperpod_scheduler.web import Dashboard, create_app

        token = token_from_env(token_env)
        load_config(config)  # a bad config is one line now, not an error page later
        dash = Dashboard(config_file=config, state=state, token=token)
        dash.store()
        if port == 0:
            port = _free_port(host)
        mode = "actions need the token in $" + token_env if token else f"read-only (set ${token_env} to allow actions)"
        console.print(f"dashboard on http://{host}:{port}/ ({mode})", highlight=False)
        try:
            uvicorn.run(create_app(dash), host=host, port=port, log_level="warning")
        finally:
            dash.close()
