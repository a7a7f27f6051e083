"""The ``hyperpod-scheduler`` console script."""

from __future__ import annotations

import os
import sys
from typing import Any

import typer
from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler import __version__
from hyperpod_scheduler.aws import deadlines
from hyperpod_scheduler.cli import agent, cluster, dashboard, demo, emulator, ops, report, schedule
from hyperpod_scheduler.cli import deploy as deploy_cli
from hyperpod_scheduler.cli.output import error_line
from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError

app = typer.Typer(
    help="Put SageMaker HyperPod clusters on a schedule and keep them healthy across it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    epilog="Every AWS call has deadlines, set with these options on any command (or the matching "
    "HYPERPOD_SCHEDULER_AWS_* variables): --aws-connect-timeout S (5), --aws-read-timeout S (30, the whole "
    "answer of one attempt), --aws-deadline S (120, the whole call with its retries), --aws-max-answer-mb N (16).",
    # Plain click help: no boxes, no `<bool>` beside flags, readable piped into less or grep.
    rich_markup_mode=None,
)
app.add_typer(cluster.app, name="cluster", help="Cluster specs: validate, render, create, describe.")
app.add_typer(emulator.app, name="emulator", help="The local HyperPod control plane (emulator).")
app.add_typer(schedule.app, name="schedule", help="Evaluate schedule expressions: check, next.")
app.add_typer(
    deploy_cli.app, name="deploy", help="Run on AWS Lambda: build the artefact, print the CloudFormation templates."
)
app.add_typer(agent.app, name="agent", help="The Slurm agent on the controller: run, install-script, audit.")
app.add_typer(deploy_cli.config_app, name="config", help="The fleet config stored in the hub: push, pull.")
ops.register(app)
demo.register(app)
report.register(app)
dashboard.register(app)


def _version(value: bool) -> None:
    if value:
        import boto3
        import botocore

        # The botocore model decides which HyperPod members a stop can re-send (docs/scheduler.md).
        print(f"hyperpod-scheduler {__version__} (boto3 {boto3.__version__}, botocore {botocore.__version__})")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Put SageMaker HyperPod clusters on a schedule and keep them healthy across it."""


# Typer >= 0.2x vendors click and names its base error TyperException; older Typer uses click's own.
_CLI_ERROR: type[Exception] = getattr(typer, "TyperException", None) or __import__("click").ClickException


def _cli_error(exc: Any) -> int:
    """Click's argument errors as one line naming the argument, with where to read more."""
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError":  # a bare group (`hyperpod-scheduler cluster`): its help
        typer.echo(ctx.get_help() if ctx is not None else exc.format_message(), err=True)
        return int(exc.exit_code)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None and getattr(exc, "exit_code", 1) == 2 else ""
    error_line(f"{exc.format_message()}{hint}")
    return int(getattr(exc, "exit_code", 1))


def main() -> None:
    """Entry point: every expected failure becomes one line on stderr and a documented exit code
    (docs/reliability.md): 2 for bad input, 1 for a refused or failed action, 130 when interrupted;
    70 means a bug of ours."""
    sys.exit(run())


def deadline_options(argv: list[str]) -> tuple[list[str], deadlines.Deadlines | None]:
    """Take the ``--aws-*`` limits out of ``argv`` wherever they stand (they apply to every command, like
    the AWS CLI's global options); the rest goes to the command."""
    names = {option: name for name, (option, _) in deadlines.OPTIONS.items()}
    rest: list[str] = []
    given: dict[str, float] = {}
    items = iter(argv)
    for arg in items:
        if arg == "--":
            rest.append(arg)
            rest.extend(items)
            break
        option, eq, value = arg.partition("=")
        if option not in names:
            rest.append(arg)
            continue
        if not eq:
            value = next(items, "")
            if not value:
                raise UsageError(f"{option}: needs a value")
        given[names[option]] = deadlines.limit_value(names[option], value, option)
    return rest, (deadlines.with_options(deadlines.from_env(), given) if given else None)


def run(argv: list[str] | None = None) -> int:
    """The CLI on ``argv`` (default: the process's arguments); returns the exit code."""
    try:
        args, limits = deadline_options(list(sys.argv[1:] if argv is None else argv))
        deadlines.use(limits)
        code = app(args=args, prog_name="hyperpod-scheduler", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        error_line("aborted")
        return 1
    except _CLI_ERROR as exc:  # click's argument errors, as one line naming the argument
        return _cli_error(exc)
    except HyperpodSchedulerError as exc:
        error_line(str(exc))
        return exc.exit_code
    except ClientError as exc:
        err = exc.response.get("Error", {})
        op = getattr(exc, "operation_name", "call")
        error_line(f"AWS {op} failed: {err.get('Code', 'Error')}: {err.get('Message', '')}")
        return 1
    except BotoCoreError as exc:
        error_line(f"AWS: {exc}")
        return 1
    except KeyboardInterrupt:
        error_line("interrupted")
        return 130
    except Exception as exc:  # a bug of ours: still one line, the traceback only on request
        if os.environ.get("HYPERPOD_SCHEDULER_DEBUG"):
            raise
        error_line(f"internal error: {type(exc).__name__}: {exc} (set HYPERPOD_SCHEDULER_DEBUG=1 for the traceback)")
        return 70
    finally:
        deadlines.use(None)


if __name__ == "__main__":
    main()
