"""The CloudFormation templates shipped as package data, with parameter defaults filled in on request.

The templates use only the long form of intrinsic functions (``Fn::Sub:``, never ``!Sub``), so they
are plain YAML: ``yaml.safe_load`` reads them and the tests can inspect every policy statement.

A parameter's default is read only when a stack is created: on an update ``aws cloudformation deploy``
keeps each parameter's previous value unless ``--parameter-overrides`` names it. So the code key is
never a default: ``-p CodeKey=...`` writes the key into both functions' ``Code`` (and drops the
parameter), and a template rendered for a new artefact changes the code by construction. The other
parameters are set as defaults, and ``overrides`` gives the line that passes them explicitly.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from importlib import resources
from typing import Any

import yaml

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs.text import digits

TEMPLATES = ("hub", "spoke")
CODE_KEY = "CodeKey"  # the hub's: written into the functions themselves, never left as a default


def template_text(name: str) -> str:
    if name not in TEMPLATES:
        raise UsageError(f"template '{name}': unknown (choose {' or '.join(TEMPLATES)})")
    return resources.files("hyperpod_scheduler.deploy").joinpath("templates", f"{name}.yaml").read_text("utf-8")


def load_template(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(template_text(name))
    return data


def parse_params(pairs: list[str]) -> dict[str, str]:
    """``Key=Value`` pairs from the command line."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param: '{pair}' is not Key=Value")
        out[key.strip()] = value
    return out


def render(name: str, params: Mapping[str, str] | None = None) -> str:
    """The template with ``params`` set as parameter defaults; unknown names are errors."""
    params = dict(params or {})
    if not params:
        return template_text(name)  # unchanged, comments included
    template = load_template(name)
    declared: dict[str, Any] = template.get("Parameters", {})
    for key, value in params.items():
        if key not in declared:
            known = ", ".join(sorted(declared))
            raise UsageError(f"template '{name}': no parameter '{key}' (parameters: {known})")
        spec = declared[key]
        allowed = spec.get("AllowedValues")
        if allowed is not None and value not in [str(a) for a in allowed]:
            raise UsageError(f"template '{name}': {key}={value!r} is not one of {[str(a) for a in allowed]}")
        pattern = spec.get("AllowedPattern")
        if pattern is not None and spec.get("Type") == "String" and not re.fullmatch(pattern, value):
            why = " ".join(str(spec.get("ConstraintDescription", "")).split())
            raise UsageError(
                f"template '{name}': {key}={value!r} does not match {pattern}" + (f": {why}" if why else "")
            )
        if key == CODE_KEY:
            continue
        spec["Default"] = int(value) if spec.get("Type") == "Number" and digits(value) else value
    if CODE_KEY in params:
        _bake_code_key(template, params[CODE_KEY])
    rendered: str = yaml.safe_dump(template, sort_keys=False, width=120)
    return rendered


def _bake_code_key(template: dict[str, Any], key: str) -> None:
    """Every ``{"Ref": "CodeKey"}`` becomes the key itself, and the parameter goes: no stack can keep an
    older value of it."""
    template["Parameters"].pop(CODE_KEY)
    for resource in template["Resources"].values():
        code = resource.get("Properties", {}).get("Code")
        if isinstance(code, dict) and code.get("S3Key") == {"Ref": CODE_KEY}:
            code["S3Key"] = key
    if _refers(template["Resources"], CODE_KEY):
        raise UsageError(f"template: {CODE_KEY} is used outside a function's Code (cannot write it in)")


def _refers(node: Any, name: str) -> bool:
    if isinstance(node, dict):
        return node.get("Ref") == name or any(_refers(v, name) for v in node.values())
    if isinstance(node, list):
        return any(_refers(v, name) for v in node)
    return isinstance(node, str) and "${" + name + "}" in node


def overrides(params: Mapping[str, str]) -> str:
    """The ``--parameter-overrides`` words that pass every parameter explicitly (not the code key, which
    the rendered template carries itself)."""
    return " ".join(shlex.quote(f"{k}={v}") for k, v in params.items() if k != CODE_KEY)
