"""The project's own error types and the one-line problem report shared by every validator.

Every user-facing failure is a ``HyperpodSchedulerError``: the CLI turns it into one line on stderr
and a non-zero exit, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One finding about a request or spec, located by field path and (when known) group name."""

    field: str
    message: str
    group: str | None = None
    severity: Severity = "error"

    def __str__(self) -> str:
        return f"{self.severity}: {self.located()}"

    def located(self) -> str:
        """The finding without its severity: ``group 'gpu' InstanceGroups[1].InstanceType: ...``."""
        where = f"group '{self.group}' " if self.group else ""
        return f"{where}{self.field}: {self.message}"


def errors_only(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


def warnings_only(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "warning"]


class HyperpodSchedulerError(Exception):
    """Base of every error this project raises on purpose. ``exit_code`` is what the CLI returns."""

    exit_code = 1


class UsageError(HyperpodSchedulerError):
    """Bad input from the user: a spec, config, schedule expression or argument."""

    exit_code = 2


class SpecError(UsageError):
    """A cluster spec or request that fails validation; carries every problem found, not just the first."""

    def __init__(self, problems: Sequence[Problem], source: str | None = None) -> None:
        self.problems = list(problems)
        self.source = source
        head = f"{source}: " if source else ""
        shown = errors_only(self.problems) or self.problems
        super().__init__(head + "; ".join(p.located() for p in shown))


class AwsError(HyperpodSchedulerError):
    """An AWS (or emulator) call failed in a way the caller cannot recover from this run."""


class MalformedAnswer(AwsError):
    """An AWS answer that lacks a field we rely on, or carries a value we do not understand."""
