"""``hyperpod-scheduler dashboard``: the token comes from the environment, never the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hyperpod_scheduler.cli import dashboard
from hyperpod_scheduler.errors import UsageError


def _app() -> typer.Typer:
    app = typer.Typer()
    dashboard.register(app)

    @app.command()
    def other() -> None:  # a second command keeps `dashboard` a named subcommand
        """Placeholder."""

    return app


def test_token_is_read_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_DASH_TOKEN", "  long-enough-token  ")
    assert dashboard.token_from_env("MY_DASH_TOKEN") == "long-enough-token"
    monkeypatch.delenv("MY_DASH_TOKEN")
    assert dashboard.token_from_env("MY_DASH_TOKEN") is None  # read-only


def test_short_token_and_bad_variable_name_are_one_line_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_DASH_TOKEN", "short")
    with pytest.raises(UsageError, match=r"--token-env: \$MY_DASH_TOKEN is 5 characters"):
        dashboard.token_from_env("MY_DASH_TOKEN")
    with pytest.raises(UsageError, match="--token-env: 'A-B' is not"):
        dashboard.token_from_env("A-B")


def test_help_offers_no_token_argument_and_binds_loopback() -> None:
    result = CliRunner().invoke(_app(), ["dashboard", "--help"])
    assert result.exit_code == 0
    assert "--token-env" in result.output and "127.0.0.1" in result.output
    assert "--token " not in result.output


def test_bad_config_fails_before_serving(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("targets: 3\n")
    result = CliRunner().invoke(_app(), ["dashboard", "--config", str(bad), "--port", "0"])
    assert result.exit_code != 0
    assert isinstance(result.exception, UsageError) and "targets" in str(result.exception)
