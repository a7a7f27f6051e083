"""A command imports what it uses, when it runs: `schedule check` and `--help` start without AWS, the
web app or the store, and the table that lists commands without importing them says what they are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.main

from hyperpod_scheduler.cli import main

# What a cron `schedule check` or `--help` must not pay for (issue 16): AWS, the web app, the store and
# the engine; and what a one-line answer to an inline expression has no use for: Rich (a terminal's
# tables and consoles), the YAML readers and the config's pydantic models (no file is read), croniter
# and the holiday tables (a window schedule on a working day).
HEAVY = (
    "boto3",
    "botocore",
    "fastapi",
    "starlette",
    "uvicorn",
    "jinja2",
    "sqlite3",
    "rich",
    "yaml",
    "ruamel",
    "croniter",
    "dateutil",
    "holidays",
    "hyperpod_scheduler.aws",
    "hyperpod_scheduler.web",
    "hyperpod_scheduler.store",
    "hyperpod_scheduler.engine",
    "hyperpod_scheduler.emulator",
    "hyperpod_scheduler.deploy",
    "hyperpod_scheduler.config",
    "hyperpod_scheduler.app",
    "hyperpod_scheduler.cost",
    "hyperpod_scheduler.cli.terminal",
    "hyperpod_scheduler.schedule.named",
    "hyperpod_scheduler.schedule.cron",
)


def _modules_after(*argv: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """Run the CLI with ``argv`` in a new interpreter; its exit code and every module it imported."""
    probe = (
        "import json, sys\n"
        "from hyperpod_scheduler.cli import main\n"
        f"sys.argv = ['hyperpod-scheduler', *{list(argv)!r}]\n"
        "code = 0\n"
        "try:\n"
        "    main.main()\n"
        "except SystemExit as exc:\n"
        "    code = exc.code or 0\n"
        "print(json.dumps([code, sorted(sys.modules)]), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False, cwd=cwd, env=env
    )
    code, modules = json.loads(done.stderr.strip().splitlines()[-1])
    return int(code), list(modules)


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


@pytest.mark.parametrize(
    "argv",
    [
        ("schedule", "check", "Mon-Fri 08:00-18:00 Europe/Berlin", "--at", "2026-11-30T09:00"),
        ("schedule", "next", "Mon-Fri 08:00-18:00 UTC", "--from", "2026-11-30T09:00", "--count", "2"),
        ("--help",),
    ],
)
def test_these_commands_start_without_aws_web_or_store_code(argv: tuple[str, ...]) -> None:
    code, modules = _modules_after(*argv)
    assert code == 0
    assert _heavy(modules) == []


# What `status` with nothing configured (issue 30: at most half of `aws --version`) has no use for: it
# answers "no clusters" from where the config file and the store are, reading neither.
STATUS_UNUSED = (
    "boto3",
    "botocore",
    "sqlite3",
    "rich",
    "yaml",
    "hyperpod_scheduler.aws",
    "hyperpod_scheduler.store",
    "hyperpod_scheduler.engine",
    "hyperpod_scheduler.config.model",
    "hyperpod_scheduler.config.load",
    "hyperpod_scheduler.app.compose",
    "hyperpod_scheduler.app.status",
    "hyperpod_scheduler.cli.status_full",
)


def _nothing_configured(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYPERPOD_SCHEDULER_")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")  # the default store's folder: empty
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    return env


@pytest.mark.parametrize("extra", [(), ("--json",), ("-o", "wide"), ("--state", "memory:")])
def test_status_with_nothing_configured_imports_no_aws_store_or_engine(tmp_path: Path, extra: tuple[str, ...]) -> None:
    code, modules = _modules_after("status", *extra, cwd=tmp_path, env=_nothing_configured(tmp_path))
    assert code == 0
    assert [m for m in modules if any(m == u or m.startswith(u + ".") for u in STATUS_UNUSED)] == []
    assert not (tmp_path / "state").exists()  # looking created no store file


def test_status_with_a_config_or_a_store_still_reads_them(tmp_path: Path) -> None:
    """The quick answer is only for nothing at all: a config file or a store file that exists is read."""
    env = _nothing_configured(tmp_path)
    (tmp_path / "hyperpod-scheduler.yaml").write_text("targets: []\n", encoding="utf-8")
    code, modules = _modules_after("status", "--state", "memory:", cwd=tmp_path, env=env)
    assert code == 0
    assert "hyperpod_scheduler.cli.status_full" in modules and "hyperpod_scheduler.config.model" in modules
    (tmp_path / "hyperpod-scheduler.yaml").unlink()
    store = tmp_path / "kept.sqlite"
    store.write_bytes(b"")
    code, modules = _modules_after("status", "--state", str(store), cwd=tmp_path, env=env)
    assert "hyperpod_scheduler.store.sqlite" in modules


def test_help_builds_no_parameter_so_imports_no_pydantic() -> None:
    # Typer coerces every parameter value through a pydantic TypeAdapter; the list of commands has none.
    code, modules = _modules_after("--help")
    assert code == 0
    assert [m for m in modules if m == "pydantic" or m.startswith(("pydantic.", "pydantic_core"))] == []


def test_what_a_command_left_out_arrives_when_it_is_used(tmp_path: Path) -> None:
    """The lazy imports are not lost: a config file, a cron schedule and an error line get their modules."""
    config = tmp_path / "hyperpod-scheduler.yaml"
    config.write_text("schedules:\n  workdays: {timezone: UTC, start: '0 8 * * 1-5', stop: '0 18 * * 1-5'}\n")
    code, modules = _modules_after("schedule", "next", "workdays", "--config", str(config), "--count", "1")
    assert code == 0
    assert {"yaml", "croniter", "hyperpod_scheduler.schedule.named"} <= set(modules)
    code, modules = _modules_after("schedule", "check", "Mon-Fri 25:00-26:00 UTC")
    assert code == 2
    assert "hyperpod_scheduler.cli.terminal" in modules  # the error line's console


def test_the_console_script_exit_still_runs_exit_handlers_and_flushes_its_output(tmp_path: Path) -> None:
    """main() freezes the heap before exiting (the last collection is skipped); what a command leaves for
    the exit, such as the notifier's drain (an atexit handler), still happens, and a long answer piped
    into another program arrives whole."""
    marker = tmp_path / "drained"
    probe = (
        "import atexit, pathlib, sys\n"
        f"atexit.register(pathlib.Path({str(marker)!r}).write_text, 'done')\n"
        "from hyperpod_scheduler.cli import main\n"
        "sys.argv = ['hyperpod-scheduler', 'schedule', 'next', 'Mon-Fri 08:00-18:00 UTC', '--count', '1000',"
        " '--from', '2026-11-30T09:00']\n"
        "main.main()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1000 and lines[-1].endswith(("running", "stopped"))
    assert marker.read_text() == "done"


def test_help_imports_no_command_module() -> None:
    code, modules = _modules_after("--help")
    assert code == 0
    commands = {f"hyperpod_scheduler.cli.{e.module}" for e in main.COMMANDS.values()}
    assert commands & set(modules) == set()


def test_a_command_that_needs_aws_still_gets_it() -> None:
    _, modules = _modules_after("cluster", "--help")
    assert "hyperpod_scheduler.cli.cluster" in modules


@pytest.mark.parametrize("module", sorted({e.module for e in main.COMMANDS.values() if e.app is None}))
def test_the_table_names_every_command_a_module_registers(module: str) -> None:
    registered = typer.Typer()
    registered.callback()(lambda: None)
    __import__(f"hyperpod_scheduler.cli.{module}", fromlist=["register"]).register(registered)
    names = set(typer.main.get_command(registered).commands)  # type: ignore[attr-defined]
    assert names == {n for n, e in main.COMMANDS.items() if e.module == module and e.app is None}


@pytest.mark.parametrize("name", list(main.COMMANDS))
def test_the_table_help_is_the_command_help(name: str) -> None:
    entry = main.COMMANDS[name]
    module = __import__(f"hyperpod_scheduler.cli.{entry.module}", fromlist=["x"])
    if entry.app is None:  # the command's own help (its docstring) is what --help listed before
        holder = typer.Typer()
        holder.callback()(lambda: None)
        module.register(holder)
        real = typer.main.get_command(holder).commands[name]  # type: ignore[attr-defined]
        assert real.get_short_help_str(10_000) == entry.help
    assert main.load(name).get_short_help_str(10_000) == entry.help


# What `report` (issue 13: under a second) has no use for: boto3 and its S3 transfers (clients come from
# botocore), the web app, the emulator, the tick's fleet, guards and Slurm side, ruamel (`prices update`).
REPORT_UNUSED = (
    "boto3",
    "s3transfer",
    "fastapi",
    "starlette",
    "jinja2",
    "ruamel",
    "hyperpod_scheduler.web",
    "hyperpod_scheduler.emulator",
    "hyperpod_scheduler.deploy",
    "hyperpod_scheduler.engine.fleet",
    "hyperpod_scheduler.guards.checkpoints",
    "hyperpod_scheduler.agent.worker",
    "hyperpod_scheduler.agent.channel",
    "hyperpod_scheduler.slurm",
)


@pytest.mark.parametrize("fsx", [(), ("--no-fsx",)])
def test_report_imports_what_it_prints_from(tmp_path: Path, fsx: tuple[str, ...]) -> None:
    config = tmp_path / "hyperpod-scheduler.yaml"
    config.write_text("targets: []\n", encoding="utf-8")
    code, modules = _modules_after("report", "-c", str(config), "--state", "memory:", "--json", *fsx)
    assert code == 0
    assert "hyperpod_scheduler.app.report" in modules  # it did build a report
    assert [m for m in modules if any(m == u or m.startswith(u + ".") for u in REPORT_UNUSED)] == []
