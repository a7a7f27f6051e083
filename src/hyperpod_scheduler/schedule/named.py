"""Named schedules from the config file's ``schedules:`` section."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule.build import build_schedule
from hyperpod_scheduler.schedule.cron import parse_cron
from hyperpod_scheduler.schedule.grammar import parse_expression
from hyperpod_scheduler.schedule.terms import CronRule, Term
from hyperpod_scheduler.schedule.timeline import Schedule


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


class ScheduleEntry(BaseModel):
    """One named schedule: either ``windows`` (inline expressions) or cron ``start``/``stop`` entries."""

    model_config = ConfigDict(extra="forbid")

    windows: list[str] = Field(default_factory=list, description="Inline expressions, combined (union).")
    start: list[str] = Field(default_factory=list, description="Cron expressions that start the cluster.")
    stop: list[str] = Field(default_factory=list, description="Cron expressions that stop the cluster.")
    timezone: str | None = Field(default=None, description="IANA zone for windows that name none.")
    skip_dates: list[date] = Field(default_factory=list, description="Local dates it stays stopped.")
    holidays: list[str] = Field(default_factory=list, description="CC or CC-SUB, e.g. US-CA.")
    mode: Literal["both", "stop-only", "start-only"] = "both"
    ready_by: bool = False
    description: str | None = None

    _as_lists = field_validator("windows", "start", "stop", "holidays", mode="before")(_as_list)

    @model_validator(mode="after")
    def _one_form(self) -> ScheduleEntry:
        if self.windows and (self.start or self.stop):
            raise ValueError("give either windows or start/stop cron entries, not both")
        if not self.windows and not (self.start or self.stop):
            raise ValueError("give windows (e.g. 'Mon-Fri 08:00-19:00 Europe/Berlin') or start/stop entries")
        if (self.start or self.stop) and not (self.start and self.stop):
            raise ValueError(
                "the cron form needs both start and stop entries (mode: stop-only or start-only limits "
                "what the scheduler does)"
            )
        return self


def load_schedules(mapping: Mapping[str, Any] | None) -> dict[str, Schedule]:
    """Every schedule of a ``schedules:`` mapping, by name. UsageError names schedule, field and value.

    A value may be a mapping (see :class:`ScheduleEntry`) or a plain inline expression string.
    """
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise UsageError(f"schedules: expected a mapping of schedule names to schedules, got {type(mapping).__name__}")
    return {_name(name): schedule_from_entry(str(name), value) for name, value in mapping.items()}


def _name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"schedules: schedule names must be non-empty text, got {name!r}")
    return name


def schedule_from_entry(name: str, value: Any) -> Schedule:
    if isinstance(value, str):
        value = {"windows": [value]}
    if not isinstance(value, Mapping):
        raise UsageError(f"schedule '{name}': expected a mapping or an expression string, got {type(value).__name__}")
    try:
        entry = ScheduleEntry.model_validate(dict(value))
    except ValidationError as exc:
        raise UsageError(f"schedule '{name}': {_describe(exc)}") from None
    field = "windows"
    try:
        terms: list[Term] = []
        for i, text in enumerate(entry.windows):
            field = f"windows[{i}]"
            terms.extend(parse_expression(text))
        cron: list[CronRule] = []
        for action in ("start", "stop"):
            for i, text in enumerate(getattr(entry, action)):
                field = f"{action}[{i}]"
                cron.append(parse_cron(text, action))
        field = "schedule"
        return build_schedule(
            terms,
            cron=cron,
            timezone=entry.timezone,
            skip_dates=entry.skip_dates,
            holidays=entry.holidays,
            mode=entry.mode,
            ready_by=entry.ready_by,
            name=name,
            expression=", ".join(entry.windows) or _cron_text(entry),
        )
    except UsageError as exc:
        where = "" if field == "schedule" else f"{field}: "
        raise UsageError(f"schedule '{name}': {where}{exc}") from None


def _cron_text(entry: ScheduleEntry) -> str:
    return "; ".join([*(f"start {e}" for e in entry.start), *(f"stop {e}" for e in entry.stop)])


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"])
        value = err.get("input")
        shown = "" if loc == "" or isinstance(value, Mapping) else f" (got {value!r})"
        message = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc + ': ' if loc else ''}{message}{shown}")
    return "; ".join(parts)
