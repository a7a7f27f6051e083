"""The emulator's own reading of the botocore SageMaker model: request validation and the answer self-check.

Requests: botocore's ``ParamValidator`` (types, required members, minimums) plus what it leaves to the
server: enums, patterns and maximums. Answers: a full walk of the output shape (unknown and required
members, types, list/map/string/number bounds, enums, patterns, aware timestamps), so the emulator can
check that everything it says is something AWS could say.

Written for the emulator alone; the product has its own checks and the two must not share code, or a
test would only prove that one reading of the model agrees with itself.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import botocore.session
from botocore.model import ListShape, MapShape, OperationModel, ServiceModel, Shape, StringShape, StructureShape
from botocore.validate import ParamValidator

SERVICE = "sagemaker"


_model_lock = threading.Lock()


@functools.cache
def _service_model() -> ServiceModel:
    return botocore.session.get_session().get_service_model(SERVICE)


def service_model() -> ServiceModel:
    # Handler threads start together: without the lock each would decode its own copy of the model.
    with _model_lock:
        return _service_model()


@functools.cache
def operation_model(operation: str) -> OperationModel:
    return service_model().operation_model(operation)


@functools.cache
def operation_names() -> frozenset[str]:
    return frozenset(service_model().operation_names)


def shape(name: str) -> Shape:
    return service_model().shape_for(name)


@functools.cache
def _regex(expr: str) -> re.Pattern[str] | None:
    try:
        return re.compile(expr)
    except re.error:  # a construct Python's re lacks; AWS still enforces it, the emulator cannot
        return None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _show_enum(values: list[str]) -> str:
    return ", ".join(values[:8]) + (", ..." if len(values) > 8 else "")


def _bounds(kind: str, size: int, s: Shape, path: str, out: list[str], *, check_min: bool) -> None:
    lo, hi = s.metadata.get("min"), s.metadata.get("max")
    if check_min and lo is not None and size < lo:
        out.append(f"{path}: {size} {kind}, at least {lo} required")
    if hi is not None and size > hi:
        out.append(f"{path}: {size} {kind}, at most {hi} allowed")


def _string(s: StringShape, value: str, path: str, out: list[str], *, check_min: bool) -> None:
    if s.enum:
        if value not in s.enum:
            out.append(f"{path}: unknown value {value!r} (allowed: {_show_enum(s.enum)})")
        return
    _bounds("characters", len(value), s, path, out, check_min=check_min)
    expr = s.metadata.get("pattern")
    compiled = _regex(expr) if expr else None
    if compiled is not None and not compiled.fullmatch(value):
        out.append(f"{path}: value {value!r} does not match the pattern {expr}")


def _values(s: Shape, value: Any, path: str, out: list[str]) -> None:
    """What ParamValidator leaves out of a request: enums, patterns and maximums."""
    if isinstance(s, StructureShape) and isinstance(value, Mapping):
        for name, member in s.members.items():
            if name in value:
                _values(member, value[name], _join(path, name), out)
    elif isinstance(s, ListShape) and isinstance(value, list):
        _bounds("items", len(value), s, path, out, check_min=False)
        for i, item in enumerate(value):
            _values(s.member, item, f"{path}[{i}]", out)
    elif isinstance(s, MapShape) and isinstance(value, Mapping):
        _bounds("entries", len(value), s, path, out, check_min=True)  # ParamValidator skips maps
        for key, item in value.items():
            if isinstance(key, str):
                _values(s.key, key, f"{path} key {key!r}", out)
            _values(s.value, item, f"{path}.{key}", out)
    elif isinstance(s, StringShape) and isinstance(value, str):
        _string(s, value, path, out, check_min=False)
    elif s.type_name in ("integer", "long") and isinstance(value, int) and not isinstance(value, bool):
        hi = s.metadata.get("max")
        if hi is not None and value > hi:
            out.append(f"{path}: value {value} is above the maximum {hi}")


_PARAM_PATH = re.compile(r"parameter (?:in )?(?P<path>[A-Za-z0-9_.\[\]]+)")


def request_problems(operation: str, params: Mapping[str, Any]) -> list[str]:
    """Every way ``params`` breaks the input shape of ``operation``, one line each; empty when valid."""
    s = operation_model(operation).input_shape
    if s is None:
        return [] if not params else [f"{operation} takes no parameters"]
    out: list[str] = []
    try:
        report = ParamValidator().validate(params, s)
    except (RuntimeError, OverflowError, ValueError, OSError) as exc:
        # botocore raises instead of reporting on some values (a timestamp past year 9999).
        return [f"invalid request value: {exc}"]
    if report.has_errors():
        out.extend(line.strip() for line in report.generate_report().splitlines() if line.strip())
    _values(s, params, "", out)
    return out


# --- answers -------------------------------------------------------------------------------------


def _answer(s: Shape, value: Any, path: str, out: list[str]) -> None:
    if isinstance(s, StructureShape):
        if not isinstance(value, Mapping):
            out.append(f"{path}: expected a structure ({s.name}), got {type(value).__name__}")
            return
        for key in value:
            if key not in s.members:
                out.append(f"{_join(path, str(key))}: not a member of {s.name}")
        for key in s.required_members:
            if key not in value:
                out.append(f"{_join(path, key)}: required by {s.name} but missing")
        for key, member in s.members.items():
            if key in value:
                _answer(member, value[key], _join(path, key), out)
    elif isinstance(s, ListShape):
        if not isinstance(value, list):
            out.append(f"{path}: expected a list ({s.name}), got {type(value).__name__}")
            return
        _bounds("items", len(value), s, path, out, check_min=True)
        for i, item in enumerate(value):
            _answer(s.member, item, f"{path}[{i}]", out)
    elif isinstance(s, MapShape):
        if not isinstance(value, Mapping):
            out.append(f"{path}: expected a map ({s.name}), got {type(value).__name__}")
            return
        _bounds("entries", len(value), s, path, out, check_min=True)
        for key, item in value.items():
            _answer(s.key, key, f"{path} key {key!r}", out)
            _answer(s.value, item, f"{path}.{key}", out)
    elif isinstance(s, StringShape):
        if not isinstance(value, str):
            out.append(f"{path}: expected a string ({s.name}), got {value!r}")
            return
        _string(s, value, path, out, check_min=True)
    elif s.type_name == "timestamp":
        if not (isinstance(value, datetime) and value.tzinfo is not None):
            out.append(f"{path}: expected an aware datetime, got {value!r}")
    elif s.type_name in ("integer", "long"):
        if not isinstance(value, int) or isinstance(value, bool):
            out.append(f"{path}: expected an integer ({s.name}), got {value!r}")
            return
        lo, hi = s.metadata.get("min"), s.metadata.get("max")
        if lo is not None and value < lo:
            out.append(f"{path}: value {value} is below the minimum {lo}")
        if hi is not None and value > hi:
            out.append(f"{path}: value {value} is above the maximum {hi}")
    elif s.type_name == "boolean" and not isinstance(value, bool):
        out.append(f"{path}: expected a boolean, got {value!r}")
    elif s.type_name in ("double", "float") and (isinstance(value, bool) or not isinstance(value, int | float)):
        out.append(f"{path}: expected a number, got {value!r}")


def answer_problems(operation: str, answer: Mapping[str, Any]) -> list[str]:
    """Every way an answer (aware datetimes, before serialisation) breaks the output shape of ``operation``."""
    s = operation_model(operation).output_shape
    if s is None:
        return [] if not answer else [f"{operation} has no output, but the answer is {dict(answer)!r}"]
    out: list[str] = []
    _answer(s, answer, "", out)
    return [f"{operation} {line}" for line in out]
