"""The one call other code needs: a spec file in, a checked CreateCluster request out.

Two input forms: the project's YAML spec, and a raw CreateCluster request in JSON as used with
``aws sagemaker create-cluster --cli-input-json`` (recognised by its PascalCase ``ClusterName``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hyperpod_scheduler.cluster.check import SpecReport, check_request, check_spec
from hyperpod_scheduler.cluster.spec import read_spec_file, spec_from_dict


def is_raw_request(data: Any) -> bool:
    return isinstance(data, Mapping) and ("ClusterName" in data or "InstanceGroups" in data)


def load_report(path: str | Path) -> SpecReport:
    """Parse and check the file at ``path`` (UsageError if unreadable, SpecError if unparseable)."""
    data = read_spec_file(path)  # JSON is YAML: one parser, one duplicate-key check
    if is_raw_request(data):
        return check_request(dict(data))
    return check_spec(spec_from_dict(data, str(path)))


def load_request(path: str | Path) -> dict[str, Any]:
    """The CreateCluster request for the file at ``path``.

    Raises SpecError carrying every error when it breaks a rule; warnings do not stop it (the CLI
    shows them, callers that care use ``load_report``).
    """
    report = load_report(path)
    report.raise_for_errors(str(path))
    return report.request
