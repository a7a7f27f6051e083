"""`hyperpod-scheduler schedule ...` commands: evaluate an expression or a named schedule.

The CLI edge is where the real clock and the config file are read; the schedule package stays pure.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from hyperpod_scheduler.cli.output import print_json
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import args
from hyperpod_scheduler.schedule import Schedule, Transition, resolve

app = typer.Typer(help="schedule commands.", no_args_is_help=True)

DEFAULT_CONFIG = Path("hyperpod-scheduler.yaml")
_EXPR_HELP = (
    "An inline expression such as 'Mon-Fri 08:00-19:00 Europe/Berlin' (see docs/schedules.md), or the "
    "name of a schedule in the config file."
)
_CONFIG_HELP = "Config file whose 'schedules:' section names schedules (default: ./hyperpod-scheduler.yaml if present)."
_HOLIDAYS_HELP = "Also stay stopped on this country's public holidays: CC or CC-SUB, e.g. US-CA or DE-BY."


def parse_instant(text: str, option: str) -> datetime:
    """An ISO 8601 instant from the command line; without an offset it means UTC."""
    return args.instant(text, option)


def read_schedules(config: Path | None) -> dict[str, Schedule]:
    """The named schedules of ``config`` (or of ./hyperpod-scheduler.yaml when present)."""
    path = config if config is not None else (DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None)
    if path is None:
        return {}
    # Only a command that reads a file pays for PyYAML and the config's pydantic models: a cron
    # `schedule check 'Mon-Fri ...'` starts without them (tests/architecture/test_lazy_cli.py).
    from hyperpod_scheduler.inputs import bounded
    from hyperpod_scheduler.schedule import load_schedules

    try:
        data = bounded.read_yaml(path)
    except bounded.Unreadable as exc:
        raise UsageError(f"--config: cannot read '{path}': {exc.problem}") from None
    except bounded.BadDocument as exc:
        raise UsageError(f"{path}: not valid YAML: {exc.where}{exc.problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return load_schedules(data.get("schedules"))
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None


def _schedule(expr: str, config: Path | None, holidays: str | None) -> Schedule:
    return resolve(expr, read_schedules(config), holidays=[holidays] if holidays else [])


def _transition_json(schedule: Schedule, t: Transition) -> dict[str, Any]:
    return {
        "at": t.at.isoformat().replace("+00:00", "Z"),
        "local": t.at.astimezone(schedule.timezone).isoformat(),
        "state": t.state,
    }


def _label(schedule: Schedule, expr: str) -> str:
    return schedule.name or expr


@app.command()
def check(
    expr: str = typer.Argument(..., metavar="EXPR_OR_NAME", help=_EXPR_HELP),
    at: str | None = typer.Option(
        None, "--at", help="ISO 8601 instant; without an offset it means UTC (default: now)."
    ),
    holidays: str | None = typer.Option(None, "--holidays", metavar="CC[-SUB]", help=_HOLIDAYS_HELP),
    config: Path | None = typer.Option(None, "--config", help=_CONFIG_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Print whether the schedule says running or stopped at an instant."""
    schedule = _schedule(expr, config, holidays)
    when = parse_instant(at, "--at") if at is not None else datetime.now(UTC)
    state = schedule.state_at(when)
    if not as_json:
        print(state)
        return
    following = schedule.next_transition(when)
    print_json(
        {
            "schedule": _label(schedule, expr),
            "expression": schedule.expression,
            "timezone": schedule.timezone.key,
            "mode": schedule.mode,
            "at": when.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "local": when.astimezone(schedule.timezone).isoformat(),
            "state": state,
            "next_transition": _transition_json(schedule, following) if following else None,
        }
    )


@app.command("next")
def next_(
    expr: str = typer.Argument(..., metavar="EXPR_OR_NAME", help=_EXPR_HELP),
    from_: str | None = typer.Option(
        None, "--from", help="ISO 8601 instant to list from; without an offset it means UTC (default: now)."
    ),
    count: int = typer.Option(5, "--count", min=1, max=1000, help="How many transitions to list."),
    holidays: str | None = typer.Option(None, "--holidays", metavar="CC[-SUB]", help=_HOLIDAYS_HELP),
    config: Path | None = typer.Option(None, "--config", help=_CONFIG_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List the next transitions: the instant in the schedule's timezone and in UTC, and the state entered."""
    schedule = _schedule(expr, config, holidays)
    when = parse_instant(from_, "--from") if from_ is not None else datetime.now(UTC)
    found = schedule.next_transitions(when, count)
    if as_json:
        print_json(
            {
                "schedule": _label(schedule, expr),
                "timezone": schedule.timezone.key,
                "mode": schedule.mode,
                "from": when.astimezone(UTC).isoformat().replace("+00:00", "Z"),
                "state": schedule.state_at(when),
                "transitions": [_transition_json(schedule, t) for t in found],
            }
        )
        return
    if not found:
        print(f"no transitions after {when.isoformat()}: the schedule stays {schedule.state_at(when)}")
        return
    for t in found:
        local = t.at.astimezone(schedule.timezone)
        utc = t.at.astimezone(UTC)
        print(f"{local:%Y-%m-%d %a %H:%M %Z}  ({utc:%Y-%m-%dT%H:%MZ})  {t.state}")
