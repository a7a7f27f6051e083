"""SageMaker answers read before botocore parses them: checked against the output shape, and compared with
it for members the installed model does not know.

botocore's parser drops members it does not know, so a setting AWS added after this botocore release
would vanish from the parsed answer and, re-sent without it, from the cluster. It also fails with an
``AttributeError`` (not a botocore error) when a structure member arrives as a string. A
``before-parse`` hook sees the raw body first: a body that is not what the shape promises becomes one
``MalformedAnswer`` naming the member, and members the model lacks are listed under ``UNKNOWN_KEY`` in
the parsed answer, where ``cluster.view.parse_cluster`` reads them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import botocore
from botocore.model import ListShape, MapShape, OperationModel, Shape, StructureShape

from hyperpod_scheduler.errors import MalformedAnswer

C = TypeVar("C")

UNKNOWN_KEY = "HyperpodSchedulerUnknownMembers"
HOOK_ID = "hyperpod-scheduler-answer-check"
_EVENT = "before-parse.sagemaker"
_SHOWN = 60  # characters of a bad value quoted in an error


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
        if not isinstance(value, Mapping):
            raise MalformedAnswer(f"{operation} answer: {where} is {_shown(value)}, expected an object")
        group = _group_name(shape, value) or group
        unknown: list[UnknownMember] = []
        for name, item in value.items():
            child = f"{path}.{name}" if path else str(name)
            if item is None:
                continue
            member = shape.members.get(name)
            if member is None:
                unknown.append(UnknownMember(child, str(name), group))
            else:
                unknown.extend(check_answer(member, item, operation, child, group))
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
    kinds = _TYPES.get(shape.type_name)
    wrong = kinds is not None and (not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)))
    if wrong:
        article = "an" if shape.type_name[0] in "aeiou" else "a"
        raise MalformedAnswer(f"{operation} answer: {where} is {_shown(value)}, expected {article} {shape.type_name}")
    return []


def _before_parse(
    operation_model: OperationModel,
    response_dict: Mapping[str, Any],
    customized_response_dict: dict[str, Any],
    **_: Any,
) -> None:
    status = response_dict.get("status_code")
    if not isinstance(status, int) or status >= 300 or operation_model.output_shape is None:
        return  # error answers are botocore's to parse
    body = response_dict.get("body")
    operation = operation_model.name
    if not isinstance(body, bytes | bytearray) or not body.strip():
        raise MalformedAnswer(f"{operation} answer: an empty body with HTTP {status} (expected a JSON object)")
    try:
        decoded = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise MalformedAnswer(
            f"{operation} answer: HTTP {status} with a body that is not JSON (truncated, or an HTML page?)"
        ) from None
    except RecursionError:
        raise MalformedAnswer(f"{operation} answer: JSON nested too deeply to read") from None
    try:
        unknown = check_answer(operation_model.output_shape, decoded, operation)
    except RecursionError:
        raise MalformedAnswer(f"{operation} answer: JSON nested too deeply to read") from None
    if unknown:
        customized_response_dict[UNKNOWN_KEY] = [u.as_dict() for u in unknown]


def watch(client: C) -> C:
    """Check every SageMaker answer this client receives (idempotent; returns the client)."""
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is not None:  # a stand-in without botocore's event system (a test fake) is left as it is
        events.register(_EVENT, _before_parse, unique_id=HOOK_ID)
    return client


def unknown_in(answer: Mapping[str, Any]) -> tuple[UnknownMember, ...]:
    """The unknown members ``watch`` recorded in a parsed answer (none if the client was not watched)."""
    found = answer.get(UNKNOWN_KEY)
    if not isinstance(found, list):
        return ()
    return tuple(UnknownMember.from_mapping(u) for u in found if isinstance(u, Mapping))


def botocore_version() -> str:
    return str(botocore.__version__)
