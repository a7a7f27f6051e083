"""A command imports what it uses, when it runs: `schedule check` and `--help` start without AWS, the
web app or the store, and the table that lists commands without importing them says what they are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.main

from hyperpod_scheduler.cli import main

# What a cron `schedule check` or `--help` must not pay for (issue 16).
HEAVY = (
    "boto3",
    "botocore",
    "fastapi",
    "starlette",
    "jinja2",
    "hyperpod_scheduler.aws",
    "hyperpod_scheduler.web",
    "hyperpod_scheduler.store",
    "hyperpod_scheduler.engine",
    "hyperpod_scheduler.emulator",
    "hyperpod_scheduler.deploy",
)


def _modules_after(*argv: str) -> tuple[int, list[str]]:
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
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
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
