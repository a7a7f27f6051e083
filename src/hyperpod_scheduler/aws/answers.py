"""SageMaker answers read before botocore parses them: checked against the output shape, and compared with
it for members the installed model does not know.

botocore's parser drops members it does not know, so a setting AWS added after this botocore release
would vanish from the parsed answer and, re-sent without it, from the cluster. It also fails with an
``AttributeError`` (not a botocore error) when a structure member arrives as a string. A
``before-parse`` hook sees the raw body first: a body that is not what the shape promises becomes one
``MalformedAnswer`` naming the member, and members the model lacks are listed under ``UNKNOWN_KEY`` in
the parsed answer, where ``cluster.view.parse_cluster`` reads them.

The same check guards every JSON-protocol service this product calls (FSx, Pricing, ...): the body is
read through the bounded reader (its size, UTF-8, nesting depth and constants checked before anything is
built), and a value botocore's parser would choke on (a timestamp like ``"yesterday"``, a blob that is
not base64, an integer past its 32 or 64 bits) is named instead of raising out of the parser.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import botocore
from botocore.model import ListShape, MapShape, OperationModel, Shape, StructureShape
from botocore.utils import parse_timestamp

from hyperpod_scheduler.errors import MalformedAnswer
from hyperpod_scheduler.inputs import bounded

C = TypeVar("C")

UNKNOWN_KEY = "HyperpodSchedulerUnknownMembers"
HOOK_ID = "hyperpod-scheduler-answer-check"
_WATCHED = "_hyperpod_scheduler_answers_watched"
_SHOWN = 60  # characters of a bad value quoted in an error
# An answer this size is refused before it is decoded (the deadlines' sender refuses it while it
# arrives; this bound also holds for a client built elsewhere). 64 levels is far beyond any AWS shape.
ANSWER_LIMITS = bounded.Limits(max_bytes=64 * bounded.MiB, max_depth=64)
_RANGES = {"integer": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_YEAR_3000 = 32503680000  # epoch seconds of 3000-01-01: any number from 0 below it is a readable timestamp
_JSON_PROTOCOLS = frozenset({"json"})


@dataclass(frozen=True)
class UnknownMember:
    """A member of an answer that the installed botocore model does not define."""

    path: str  # e.g. InstanceGroups[1].AutoPatchConfig.NewKnob
    member: str  # the member's own name: NewKnob
    group: str | None  # the instance group it sits in, if any

    def as_dict(self) -> dict[str, str | None]:
        return {"path": self.path, "member": self.member, "group": self.group}

    @classmethod
    def from_mapping(cls, value: Mapping[str, Any]) -> UnknownMember:
        group = value.get("group")
        return cls(str(value.get("path", "")), str(value.get("member", "")), group if isinstance(group, str) else None)


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "blob": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "long": (int,),
    "float": (int, float),
    "double": (int, float),
    "timestamp": (int, float, str),
}


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _group_name(shape: StructureShape, value: Mapping[str, Any]) -> str | None:
    name = value.get("InstanceGroupName") if "InstanceGroupName" in shape.members else None
    return name if isinstance(name, str) else None


def check_answer(
    shape: Shape, value: Any, operation: str, path: str = "", group: str | None = None
) -> list[UnknownMember]:
    """Raise ``MalformedAnswer`` where ``value`` is not of the kind ``shape`` says; return the members
    the shape does not define (at any depth), in answer order."""
    where = path or "the answer"
    if isinstance(shape, StructureShape):
        if shape.is_document_type:
            return []  # free-form JSON by definition
        if not isinstance(value, Mapping):
            raise MalformedAnswer(f"{operation} answer: {where} is {_shown(value)}, expected an object")
        if shape.is_tagged_union and len([k for k, v in value.items() if v is not None and k != "__type"]) != 1:
            raise MalformedAnswer(f"{operation} answer: {where} must have exactly one member set (a union)")
        group = _group_name(shape, value) or group
        unknown: list[UnknownMember] = []
        plan = _plan(shape)
        for name, item in value.items():
            if item is None:
                continue
            entry = plan.get(name)
            if entry is None:
                unknown.append(UnknownMember(f"{path}.{name}" if path else str(name), str(name), group))
                continue
            member, scalar = entry
            if scalar is not None:  # checked here: most members are scalars, and a call per member adds up
                if not _scalar_ok(scalar, item):
                    _wrong_kind(operation, f"{path}.{name}" if path else str(name), item, scalar)
            else:
                unknown.extend(check_answer(member, item, operation, f"{path}.{name}" if path else str(name), group))
        return unknown
    if isinstance(shape, ListShape):
        if not isinstance(value, list):
            raise MalformedAnswer(f"{operation} answer: {where} is {_shown(value)}, expected a list")
        return [
            u
            for i, item in enumerate(value)
            for u in check_answer(shape.member, item, operation, f"{path}[{i}]", group)
        ]
    if isinstance(shape, MapShape):
        if not isinstance(value, Mapping):
            raise MalformedAnswer(f"{operation} answer: {where} is {_shown(value)}, expected an object")
        return [
            u for k, item in value.items() for u in check_answer(shape.value, item, operation, f"{path}.{k}", group)
        ]
    if shape.type_name in _TYPES and not _scalar_ok(shape.type_name, value):
        _wrong_kind(operation, where, value, shape.type_name)
    return []


_PLAN = "_hyperpod_scheduler_answer_plan"


def _plan(shape: StructureShape) -> dict[str, tuple[Shape, str | None]]:
    """Each member's shape, with its scalar type (None for a container), kept on the shape object itself
    (as botocore keeps its own cached properties) so every answer of that shape reuses it."""
    plan: dict[str, tuple[Shape, str | None]] | None = shape.__dict__.get(_PLAN)
    if plan is None:
        plan = {
            name: (member, member.type_name if member.type_name in _TYPES else None)
            for name, member in shape.members.items()
        }
        shape.__dict__[_PLAN] = plan
    return plan


def _scalar_ok(kind: str, value: Any) -> bool:
    kinds = _TYPES[kind]
    if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
        return False
    return kind == "string" or _readable(kind, value)


def _wrong_kind(operation: str, where: str, value: Any, kind: str) -> None:
    article = "an" if kind[0] in "aeiou" else "a"
    raise MalformedAnswer(f"{operation} answer: {where} is {_shown(value)}, expected {article} {kind}")


def _readable(kind: str, value: Any) -> bool:
    """Whether botocore's parser can turn ``value`` (already of the right JSON kind) into a ``kind``."""
    if kind in _RANGES:
        low, high = _RANGES[kind]
        return bool(low <= value <= high)
    if kind in ("float", "double"):
        return math.isfinite(value)
    if kind == "timestamp":
        if type(value) in (int, float) and 0 <= value < _YEAR_3000:
            return True  # epoch seconds botocore reads (the JSON protocol's usual form): no parse twice
        try:
            parse_timestamp(value)
        except Exception:  # ValueError, OverflowError, RuntimeError (dateutil), OSError: all unreadable
            return False
        return True
    if kind == "blob":
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return False
    return True


def _before_parse(
    operation_model: OperationModel,
    response_dict: Mapping[str, Any],
    customized_response_dict: dict[str, Any],
    **_: Any,
) -> None:
    status = response_dict.get("status_code")
    service = operation_model.service_model
    if isinstance(status, int) and status >= 300 and service.protocol in _JSON_PROTOCOLS:
        _readable_error(response_dict, status, operation_model.name)
        return  # an error answer stays an error (a ClientError botocore can retry or name)
    if not isinstance(status, int) or status >= 300 or operation_model.output_shape is None:
        return
    if service.protocol not in _JSON_PROTOCOLS or operation_model.has_streaming_output:
        return  # XML and streamed answers: botocore's parsers (expat refuses entity bombs itself)
    body = response_dict.get("body")
    operation = operation_model.name
    if not isinstance(body, bytes | bytearray) or not body.strip():
        raise MalformedAnswer(f"{operation} answer: an empty body with HTTP {status} (expected a JSON object)")
    try:
        decoded = bounded.load_json(bytes(body), f"{operation} answer", ANSWER_LIMITS)
    except bounded.BadDocument as exc:
        problem = exc.problem
        if exc.problem.startswith("nested"):
            problem = f"JSON nested too deeply to read ({exc.problem})"
        elif "UTF-8" not in exc.problem and "Unicode" not in exc.problem and "larger" not in exc.problem:
            problem = f"HTTP {status} with a body that is not JSON (truncated, or an HTML page?): {exc.where}{problem}"
        raise MalformedAnswer(f"{operation} answer: {problem}") from None
    try:
        unknown = check_answer(operation_model.output_shape, decoded, operation)
    except RecursionError:  # not reached within the depth limit; kept as the last word all the same
        raise MalformedAnswer(f"{operation} answer: JSON nested too deeply to read") from None
    if unknown and service.service_name == "sagemaker":
        customized_response_dict[UNKNOWN_KEY] = [u.as_dict() for u in unknown]


_ERROR_TEXT = ("__type", "code", "Code", "message", "Message")


def _readable_error(response_dict: Mapping[str, Any], status: int, operation: str) -> None:
    """Make an error answer botocore's error parser can read. Its parser raises RecursionError,
    UnicodeDecodeError, TypeError or AttributeError (none a botocore error) on an error body nested too
    deep, not UTF-8, not an object, or with a code that is not text; such a body is replaced by one that
    says so, so the call still ends in a ClientError with the HTTP status as its code."""
    body = response_dict.get("body")
    if not isinstance(body, bytes | bytearray) or not body.strip():
        return
    try:
        decoded = bounded.load_json(bytes(body), f"{operation} error answer", ANSWER_LIMITS)
        problem = None if isinstance(decoded, Mapping) else "not a JSON object"
        if problem is None:
            wrong = [k for k in _ERROR_TEXT if decoded.get(k) is not None and not isinstance(decoded[k], str)]
            problem = f"{wrong[0]} is not text" if wrong else None
    except bounded.BadDocument as exc:
        problem = exc.problem
    if problem is not None and isinstance(response_dict, dict):
        said = f"HTTP {status} with an error body that could not be read ({problem})"
        response_dict["body"] = json.dumps({"message": said}).encode()


def watch(client: C) -> C:
    """Check every answer this client receives before botocore parses it (idempotent; returns the
    client). Unknown members are recorded for SageMaker answers only."""
    meta = getattr(client, "meta", None)
    events = getattr(meta, "events", None)
    if events is not None and not getattr(meta, _WATCHED, False):  # a test fake without events is left as it is
        service = meta.service_model.service_id.hyphenize()  # type: ignore[union-attr]
        events.register(f"before-parse.{service}", _before_parse, unique_id=HOOK_ID)
        setattr(meta, _WATCHED, True)  # the engine asks once per call: registering again costs more than the check
    return client


def unknown_in(answer: Mapping[str, Any]) -> tuple[UnknownMember, ...]:
    """The unknown members ``watch`` recorded in a parsed answer (none if the client was not watched)."""
    found = answer.get(UNKNOWN_KEY)
    if not isinstance(found, list):
        return ()
    return tuple(UnknownMember.from_mapping(u) for u in found if isinstance(u, Mapping))


def botocore_version() -> str:
    return str(botocore.__version__)
