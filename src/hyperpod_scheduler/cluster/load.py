"""The one call other code needs: a spec file in, a checked CreateCluster request out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hyperpod_scheduler.cluster.check import SpecReport, check_spec
from hyperpod_scheduler.cluster.spec import load_spec


def load_report(path: str | Path) -> SpecReport:
    """Parse and check the spec at ``path`` (UsageError if unreadable, SpecError if unparseable)."""
    return check_spec(load_spec(path))


def load_request(path: str | Path) -> dict[str, Any]:
    """The CreateCluster request for the spec at ``path``.

    Raises SpecError carrying every error when the spec breaks a rule; warnings do not stop it (the
    CLI shows them, callers that care use ``load_report``).
    """
    report = load_report(path)
    report.raise_for_errors(str(path))
    return report.request
