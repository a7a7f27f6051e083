"""The ``hyperpod-scheduler`` console script.

Subcommands are imported when they are used: a cron ``tick`` or ``schedule check`` is a new process
each time, and importing every command (boto3, the engine, the web app, the emulator) cost more than
half a second before anything ran. ``COMMANDS`` names each command, the module that defines it and its
one-line help (for ``--help``, which lists them without importing any); ``tests/architecture`` checks
that the table says what the modules do.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand, TyperGroup

from hyperpod_scheduler.cli import arguments
from hyperpod_scheduler.cli.output import error_line
from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError

if TYPE_CHECKING:
    from hyperpod_scheduler.aws import deadlines


@dataclass(frozen=True)
class Entry:
    module: str  # under hyperpod_scheduler.cli
    help: str
    app: str | None = None  # a Typer sub-app of the module (a command group); None: the module's register()


COMMANDS: dict[str, Entry] = {
    "cluster": Entry("cluster", "Cluster specs: validate, render, create, describe.", "app"),
    "emulator": Entry("emulator", "The local HyperPod control plane (emulator).", "app"),
    "schedule": Entry("schedule", "Evaluate schedule expressions: check, next.", "app"),
    "deploy": Entry("deploy", "Run on AWS Lambda: build the artefact, print the CloudFormation templates.", "app"),
    "agent": Entry("agent", "The Slurm agent on the controller: run, install-script, audit.", "app"),
    "config": Entry("deploy", "The fleet config stored in the hub: push, pull.", "config_app"),
    "stop": Entry(
        "manual", "Record every group's size, then scale every group to 0 in one UpdateCluster (protected groups stay)."
    ),
    "start": Entry("manual", "Restore every group to its recorded size in one UpdateCluster."),
    "tick": Entry("tick", "One reconcile pass over every governed cluster (for cron)."),
    "run": Entry("run", "The long-running loop: tick every --interval seconds, following edits of the config file."),
    "status": Entry(
        "status",
        "Every cluster the config governs or the store remembers: state (and what still bills), schedule, next "
        "transition in the schedule's timezone, flags; -o wide adds sizes and outcomes.",
    ),
    "plan": Entry("plan", "What would happen, and when, touching nothing."),
    "history": Entry(
        "records", "The actions taken on a cluster, newest first: what happened, per group, and how long it took."
    ),
    "hold": Entry(
        "records", "Override the schedule: keep a cluster running (or stopped) until a time or until released."
    ),
    "release": Entry("records", "End a hold; the next tick applies what the schedule wants."),
    "claim": Entry(
        "records",
        "Say whose cluster this is: remember the account this profile reaches now for it (replacing an earlier "
        "one), and give it the record kept from before account keys, if one is waiting.",
    ),
    "forget": Entry(
        "records",
        "Drop the sizes recorded at the last stop (a start then restores nothing); for a cluster or a group "
        "replaced while stopped, whose recorded sizes a start refuses to restore onto something else.",
    ),
    "allow-image": Entry(
        "records", "Let a group take again an AMI release refused after its first morning failed on it."
    ),
    "demo": Entry("demo", "Create three example clusters in the emulator and schedule them across a virtual week."),
    "report": Entry(
        "report",
        "Per cluster and in total, per night and per month: the saving (instance cost avoided), and beside it the "
        "FSx that kept billing and the groups kept running; start shortfalls; every price's source.",
    ),
    "prices": Entry("report", "Prices the report uses: update from the AWS Price List API."),
    "dashboard": Entry(
        "dashboard",
        "Serve the dashboard: fleet, cluster timelines, savings, schedule grid, and (with a token) actions.",
    ),
}


def load(name: str) -> Any:
    """The click command ``name`` as Typer builds it from its module (imported now)."""
    entry = COMMANDS[name]
    module = importlib.import_module(f"hyperpod_scheduler.cli.{entry.module}")
    holder = typer.Typer(rich_markup_mode=None)  # the root's plain help, as commands had when built eagerly
    holder.callback()(lambda: None)  # a group, even with one command in it
    if entry.app is not None:
        holder.add_typer(getattr(module, entry.app), name=name, help=entry.help)
    else:
        module.register(holder)
    command = typer.main.get_command(holder).commands[name]  # type: ignore[attr-defined]
    _output_beside_json(command)
    return command


def _output_param() -> Any:
    """The ``-o/--output`` option as Typer builds it (Typer carries its own click: a parameter made by
    another click would not fit its context)."""
    holder = typer.Typer()

    @holder.command()
    def _(
        output: str | None = typer.Option(
            None, "--output", "-o", metavar="FORMAT", help="json (the same as --json) or table (the default)."
        ),
    ) -> None: ...

    return typer.main.get_command(holder).params[0]


def _output_beside_json(command: Any) -> None:
    """Every command with ``--json`` also takes ``-o/--output json`` (``--json`` stays, the same thing):
    ``--help`` says "Same as -o json", so ``-o json`` must never be refused. A command that already
    has its own ``-o`` (with table, wide, yaml) keeps it."""
    for sub in getattr(command, "commands", {}).values():
        _output_beside_json(sub)
    flags = {opt for p in command.params for opt in getattr(p, "opts", ())}
    if "--json" not in flags or "--output" in flags or "-o" in flags:
        return
    json_param = next(p.name for p in command.params if "--json" in getattr(p, "opts", ()))
    command.params.append(_output_param())
    inner = command.callback

    def callback(**kwargs: Any) -> Any:
        output = kwargs.pop("output", None)
        if output is not None:
            value = str(output).strip().lower()
            if value not in ("json", "table"):
                raise UsageError(f"-o/--output: {output!r} is not one of json, table")
            if value == "json":
                kwargs[json_param] = True
            elif kwargs.get(json_param):
                raise UsageError("--json and -o table: choose one output")
        return inner(**kwargs)

    command.callback = callback


class LazyGroup(TyperGroup):
    """The root group: lists every command from ``COMMANDS`` and imports one only when it runs."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(n for n in self.commands if n not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = load(cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """A mistyped command (``stpo``) gets the nearest one named: "did you mean 'stop'?"."""
        import difflib

        name = args[0] if args else ""
        if args and not name.startswith("-") and self.get_command(ctx, name) is None:
            near = difflib.get_close_matches(name, self.list_commands(ctx), n=1, cutoff=0.6)
            if near:
                raise UsageError(
                    f"no such command {name!r}; did you mean {near[0]!r}? (see 'hyperpod-scheduler --help')"
                )
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # As click lists them, from the table's help: listing imports nothing.
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            cmd = self.commands.get(name) or TyperCommand(name=name, help=COMMANDS[name].help)
            if not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = typer.Typer(
    cls=LazyGroup,
    help="Put SageMaker HyperPod clusters on a schedule and keep them healthy across it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    epilog="Every AWS call has deadlines, set with these options on any command (or the matching "
    "HYPERPOD_SCHEDULER_AWS_* variables): --aws-connect-timeout S (5), --aws-read-timeout S (30, the whole "
    "answer of one attempt), --aws-deadline S (120, the whole call with its retries), --aws-max-answer-mb N (16).",
    # Plain click help: no boxes, no `<bool>` beside flags, readable piped into less or grep; and Rich's
    # help would build every command to list it.
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        import boto3
        import botocore

        from hyperpod_scheduler import __version__

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
    code = run()
    # The process ends here, and the interpreter's last collection walks every object the command
    # built (Typer's and pydantic's by the hundred thousand, botocore's models): a fifth of a cron
    # `schedule check`, up to 0.4 s of a `report` on a loaded machine, after the output was out. Frozen
    # objects are left to the exit; atexit handlers and every refcount finaliser still run. Not in
    # run(): a process that goes on after it (a test) must keep collecting.
    gc.freeze()
    sys.exit(code)


def deadline_options(argv: list[str]) -> tuple[list[str], deadlines.Deadlines | None]:
    """Take the ``--aws-*`` limits out of ``argv`` wherever they stand (they apply to every command, like
    the AWS CLI's global options); the rest goes to the command."""
    if not any(arg.startswith("--aws-") for arg in argv):
        return argv, None  # aws.deadlines (and botocore with it) is left to the commands that call AWS
    from hyperpod_scheduler.aws import deadlines

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
        if sys.stdout is None:  # started with stdout closed (`>&-`): what it did could not be told
            raise UsageError(
                "stdout is closed: nothing this command prints could be read, so it does nothing (send it to "
                "/dev/null to discard the output)"
            )
        args, limits = deadline_options(arguments.checked(list(sys.argv[1:] if argv is None else argv)))
        if limits is not None:
            _deadlines().use(limits)
        code = app(args=args, prog_name="hyperpod-scheduler", standalone_mode=False)
        sys.stdout.flush()  # a full disk or a closed pipe is found here, while a line can still say so
        return code if isinstance(code, int) else 0
    except typer.Exit as exc:
        if exc.exit_code == 0 and not arguments.stdout_works():
            return _stdout_failed(None)
        return int(exc.exit_code)
    except typer.Abort:
        error_line("aborted")
        return 1
    except _CLI_ERROR as exc:  # click's argument errors, as one line naming the argument
        return _cli_error(exc)
    except HyperpodSchedulerError as exc:
        error_line(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        error_line("interrupted")
        return 130
    except OSError as exc:
        if arguments.output_failed(exc):  # the error was writing stdout (/dev/full, a closed pipe)
            return _stdout_failed(exc)
        return _internal(exc)
    except Exception as exc:
        return _internal(exc)
    finally:
        if "hyperpod_scheduler.aws.deadlines" in sys.modules:  # only a command that called AWS set any
            _deadlines().use(None)


def _stdout_failed(exc: OSError | None) -> int:
    """One line for output that could not be written, and stdout pointed at /dev/null so the interpreter's
    last flush cannot fail again (exit 120 and an 'Exception ignored' message)."""
    arguments.discard_stdout()
    why = (exc.strerror if exc is not None else None) or "the output could not be written"
    error_line(f"stdout: cannot write: {why}; the output is incomplete")
    return 2


def _internal(exc: Exception) -> int:
    """A botocore error as its one line (exit 1); anything else is a bug of ours (exit 70)."""
    line = _aws_error(exc)
    if line is not None:
        error_line(line)
        return 1
    if os.environ.get("HYPERPOD_SCHEDULER_DEBUG"):  # a bug of ours: still one line, the traceback on request
        raise exc
    error_line(f"internal error: {type(exc).__name__}: {exc} (set HYPERPOD_SCHEDULER_DEBUG=1 for the traceback)")
    return 70


def _deadlines() -> Any:
    from hyperpod_scheduler.aws import deadlines

    return deadlines


def _aws_error(exc: Exception) -> str | None:
    """The one line for a botocore error, or None. botocore is not imported for it: a command that never
    imported botocore cannot have raised one of its errors."""
    errors = sys.modules.get("botocore.exceptions")
    if errors is None:
        return None
    if isinstance(exc, errors.ClientError):
        err = exc.response.get("Error", {})
        op = getattr(exc, "operation_name", "call")
        return f"AWS {op} failed: {err.get('Code', 'Error')}: {err.get('Message', '')}"
    if isinstance(exc, errors.BotoCoreError):
        return f"AWS: {exc}"
    return None


if __name__ == "__main__":
    main()
