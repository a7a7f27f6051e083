"""The one call other code needs: a spec file in, a checked CreateCluster request out.

Two input forms: the project's YAML spec, and a raw CreateCluster request in JSON as used with
``aws sagemaker create-cluster --cli-input-json`` (recognised by its PascalCase ``ClusterName``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hyperpod_scheduler.cluster.check import SpecReport, check_request, check_spec
from hyperpod_scheduler.cluster.spec import read_spec_file, spec_from_dict
from hyperpod_scheduler.errors import Problem, SpecError


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


_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _without(data: Any, field: str) -> bool:
    """Remove the key at ``field`` (``instance_groups[1].instance_typ``) from ``data``; False if absent."""
    steps: list[str | int] = [int(i) if i else key for key, i in _STEP.findall(field)]
    node = data
    for step in steps[:-1]:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            return False
    if isinstance(node, dict) and steps and steps[-1] in node:
        del node[steps[-1]]
        return True
    return False


def every_problem(path: str | Path) -> tuple[SpecReport | None, list[Problem]]:
    """For ``cluster validate``: the report and, when the spec does not parse, every structural problem;
    unknown fields are set aside and the rest is still judged by the rules, so one typo does not hide
    the other problems."""
    try:
        return load_report(path), []
    except SpecError as exc:
        structural = list(exc.problems)
    data = copy.deepcopy(read_spec_file(path))
    if is_raw_request(data) or not all(p.message.startswith("unknown field") for p in structural):
        return None, structural
    if not all(_without(data, p.field) for p in structural):
        return None, structural
    try:
        return check_spec(spec_from_dict(data, str(path))), structural
    except SpecError as again:
        return None, structural + list(again.problems)
