"""The one call other code needs: a spec file in, a checked CreateCluster request out.

Two input forms: the project's YAML spec, and a raw CreateCluster request in JSON as used with
``aws sagemaker create-cluster --cli-input-json`` (recognised by its PascalCase ``ClusterName``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hyperpod_scheduler.cluster.check import SpecReport, check_request, check_spec
from hyperpod_scheduler.cluster.spec import parse_yaml, spec_from_dict
from hyperpod_scheduler.errors import UsageError


def is_raw_request(data: Any) -> bool:
    return isinstance(data, Mapping) and ("ClusterName" in data or "InstanceGroups" in data)


def load_report(path: str | Path) -> SpecReport:
    """Parse and check the file at ``path`` (UsageError if unreadable, SpecError if unparseable)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"spec file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read spec file {p}: {exc}") from None
    data = parse_yaml(text, str(p))  # JSON is YAML: one parser, one duplicate-key check
    if is_raw_request(data):
        return check_request(dict(data))
    return check_spec(spec_from_dict(data, str(p)))


def load_request(path: str | Path) -> dict[str, Any]:
    """The CreateCluster request for the file at ``path``.

    Raises SpecError carrying every error when it breaks a rule; warnings do not stop it (the CLI
    shows them, callers that care use ``load_report``).
    """
    report = load_report(path)
    report.raise_for_errors(str(path))
    return report.request
