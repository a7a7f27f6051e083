"""The AWS JSON 1.1 protocol layer: from HTTP request bytes to a backend call and back to AWS-shaped bytes.

Knows nothing of clusters or capacity (that is the backend's job, behind ``Dispatcher``) and nothing of
sockets (that is ``server.py``). One request goes: fault injection, target, JSON body, model validation
against the installed botocore service model, timestamps to aware datetimes, ``dispatch``, then the
answer with datetimes as epoch seconds. Every failure becomes AWS's JSON error shape.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import re
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from botocore.model import ListShape, MapShape, Shape, StructureShape
from botocore.utils import parse_timestamp

from hyperpod_scheduler.emulator.errors import EmulatorError, throttled, validation
from hyperpod_scheduler.emulator.shapes import (
    answer_problems,
    operation_model,
    operation_names,
    request_problems,
    service_model,
)
from hyperpod_scheduler.errors import UsageError

log = logging.getLogger(__name__)

DEFAULT_REGION: Final = "us-east-1"
DEFAULT_ACCOUNT: Final = "123456789012"
CONTENT_TYPE: Final = "application/x-amz-json-1.1"
TARGET_PREFIX: Final = "SageMaker."

_CREDENTIAL_SCOPE = re.compile(r"Credential=[^/,\s]+/\d{8}/(?P<region>[a-z0-9-]+)/")


class Dispatcher(Protocol):
    """What the protocol layer needs of the domain model (``HyperPodBackend`` fits)."""

    def dispatch(
        self, operation: str, params: dict[str, Any], *, region: str = ..., account: str = ...
    ) -> dict[str, Any]: ...


# --- fault injection -------------------------------------------------------------------------------

_RATES: Final = ("throttle_rate", "error_rate")


@dataclass
class Faults:
    """Injected trouble, drawn per API request from a seeded RNG; every field can change at run time.

    ``throttle_rate`` and ``error_rate`` are probabilities (0 to 1) of a ThrottlingException and of an
    HTTP 500 InternalFailure; ``latency_ms`` is added before every API answer.
    """

    throttle_rate: float = 0.0
    error_rate: float = 0.0
    latency_ms: float = 0.0
    seed: int = 0
    _rng: random.Random = field(init=False, repr=False, compare=False)
    _lock: threading.Lock = field(init=False, repr=False, compare=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def __setattr__(self, name: str, value: Any) -> None:
        # Validate on every assignment, so `emulator.faults.error_rate = 2` fails where it is written.
        if name in _RATES:
            value = _number(name, value)
            if not 0.0 <= value <= 1.0:
                raise UsageError(f"faults: {name} must be between 0 and 1, got {value}")
        elif name == "latency_ms":
            value = _number(name, value)
            if value < 0:
                raise UsageError(f"faults: latency_ms must be 0 or more, got {value}")
        elif name == "seed":
            if isinstance(value, bool) or not isinstance(value, int):
                raise UsageError(f"faults: seed must be an integer, got {value!r}")
            if "_rng" in self.__dict__:
                self._rng.seed(value)
        object.__setattr__(self, name, value)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], seed: int = 0) -> Faults:
        faults = cls(seed=seed)
        faults.update(values)
        return faults

    def update(self, values: Mapping[str, Any]) -> None:
        """Apply a partial change such as ``{"throttle_rate": 0.3}``; unknown keys are a UsageError."""
        known = {"throttle_rate", "error_rate", "latency_ms", "seed"}
        unknown = sorted(set(values) - known)
        if unknown:
            raise UsageError(f"faults: unknown field {unknown[0]!r} (known: {', '.join(sorted(known))})")
        with self._lock:
            for key in ("seed", "throttle_rate", "error_rate", "latency_ms"):
                if key in values:
                    setattr(self, key, values[key])

    def as_dict(self) -> dict[str, Any]:
        return {
            "throttle_rate": self.throttle_rate,
            "error_rate": self.error_rate,
            "latency_ms": self.latency_ms,
            "seed": self.seed,
        }

    def draw(self) -> EmulatorError | None:
        """The injected error for one request, or None. Two draws always, so a seed replays exactly."""
        with self._lock:
            throttle, error = self._rng.random(), self._rng.random()
        if throttle < self.throttle_rate:
            return throttled("Rate exceeded")
        if error < self.error_rate:
            return EmulatorError("InternalFailure", "We encountered an internal error. Please try again.", 500)
        return None


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"faults: {name} must be a number, got {value!r}")
    return float(value)


# --- requests --------------------------------------------------------------------------------------


def region_from_authorization(header: str | None) -> str:
    """The region of a SigV4 credential scope (``Credential=AKID/DATE/REGION/sagemaker/aws4_request``)."""
    if header:
        match = _CREDENTIAL_SCOPE.search(header)
        if match:
            return match.group("region")
    return DEFAULT_REGION


def operation_from_target(target: str | None) -> str:
    if not target or not target.startswith(TARGET_PREFIX):
        raise EmulatorError("UnknownOperationException", f"Unknown target {target!r}", 400)
    name = target[len(TARGET_PREFIX) :]
    if name not in operation_names():
        raise EmulatorError("UnknownOperationException", f"Unknown operation {name!r}", 400)
    return name


def decode_body(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        decoded = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EmulatorError("SerializationException", f"Malformed JSON request body: {exc}", 400) from None
    if not isinstance(decoded, dict):
        raise EmulatorError("SerializationException", "The request body must be a JSON object", 400)
    return decoded


def check_model(operation: str, params: Mapping[str, Any]) -> None:
    """Raise a ValidationException naming every field the botocore model rejects."""
    problems = request_problems(operation, params)
    if problems:
        noun = "error" if len(problems) == 1 else "errors"
        raise validation(f"{len(problems)} validation {noun} detected: {'; '.join(problems)}")


class AnswerShapeError(Exception):
    """An answer the emulator was about to give breaks the botocore output shape (a bug in the emulator)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def check_answer(operation: str, answer: Mapping[str, Any]) -> None:
    """Raise ``AnswerShapeError`` when ``answer`` is not something the real service could say."""
    problems = answer_problems(operation, answer)
    if problems:
        raise AnswerShapeError(problems)


@functools.cache
def _has_timestamp(shape_name: str) -> bool:
    """Whether any member below this shape is a timestamp (so timestamp-free subtrees are skipped)."""

    def walk(shape: Shape, seen: frozenset[str]) -> bool:
        if shape.type_name == "timestamp":
            return True
        if shape.name in seen:
            return False
        seen = seen | {shape.name}
        if isinstance(shape, StructureShape):
            return any(walk(m, seen) for m in shape.members.values())
        if isinstance(shape, ListShape):
            return walk(shape.member, seen)
        if isinstance(shape, MapShape):
            return walk(shape.value, seen)
        return False

    return walk(service_model().shape_for(shape_name), frozenset())


@functools.cache
def _timestamp_members(shape_name: str) -> frozenset[str]:
    """The members of a structure worth descending into: those with a timestamp somewhere below."""
    shape = service_model().shape_for(shape_name)
    if not isinstance(shape, StructureShape):
        return frozenset()
    return frozenset(name for name, member in shape.members.items() if _has_timestamp(member.name))


def to_datetime(value: Any) -> datetime:
    """A wire timestamp (epoch seconds, or an ISO 8601 / RFC 822 string) as an aware UTC datetime."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        parsed = datetime.fromtimestamp(value, UTC)
    else:
        parsed = parse_timestamp(value)
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def parse_timestamps(shape: Shape, value: Any) -> Any:
    """A copy of ``value`` with every timestamp member (as the shape says) an aware datetime."""
    if shape.type_name == "timestamp":
        try:
            return to_datetime(value)
        except (ValueError, TypeError, OverflowError, OSError):
            raise validation(f"timestamp {value!r} is out of range or unreadable") from None
    if not _has_timestamp(shape.name):
        return value
    if isinstance(shape, StructureShape) and isinstance(value, dict):
        hot, members = _timestamp_members(shape.name), shape.members
        return {k: parse_timestamps(members[k], v) if k in hot else v for k, v in value.items()}
    if isinstance(shape, ListShape) and isinstance(value, list):
        return [parse_timestamps(shape.member, v) for v in value]
    if isinstance(shape, MapShape) and isinstance(value, dict):
        return {k: parse_timestamps(shape.value, v) for k, v in value.items()}
    return value


# --- responses -------------------------------------------------------------------------------------


def epoch_seconds(value: datetime) -> float:
    if value.tzinfo is None:  # the contract says aware; a naive one is taken as UTC rather than local
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _json_default(value: Any) -> Any:
    # A datetime the output shape does not declare still serialises (AWS's own format) instead of a 500.
    if isinstance(value, datetime):
        return epoch_seconds(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def serialise_timestamps(shape: Shape, value: Any) -> Any:
    """A copy of ``value`` shaped for the wire: timestamps as epoch seconds, None members dropped."""
    if shape.type_name == "timestamp" and isinstance(value, datetime):
        return epoch_seconds(value)
    if not _has_timestamp(shape.name):
        return value
    if isinstance(shape, StructureShape) and isinstance(value, dict):
        hot, members = _timestamp_members(shape.name), shape.members
        return {k: serialise_timestamps(members[k], v) if k in hot else v for k, v in value.items() if v is not None}
    if isinstance(shape, ListShape) and isinstance(value, list):
        return [serialise_timestamps(shape.member, v) for v in value]
    if isinstance(shape, MapShape) and isinstance(value, dict):
        return {k: serialise_timestamps(shape.value, v) for k, v in value.items()}
    return value


def encode_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=_json_default).encode()


@dataclass(frozen=True)
class Reply:
    """An HTTP answer: status, headers and body, plus the latency to add before sending it."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    delay_seconds: float = 0.0


def json_reply(status: int, payload: Any, request_id: str | None = None, delay: float = 0.0) -> Reply:
    rid = request_id or str(uuid.uuid4())
    headers = (("Content-Type", CONTENT_TYPE), ("x-amzn-RequestId", rid))
    return Reply(status, encode_json(payload), headers, delay)


def error_reply(error: EmulatorError, request_id: str | None = None, delay: float = 0.0) -> Reply:
    """AWS's JSON 1.1 error shape: ``__type`` and ``message`` in the body, the code in a header too."""
    rid = request_id or str(uuid.uuid4())
    body = encode_json({"__type": error.code, "message": error.message})
    headers = (("Content-Type", CONTENT_TYPE), ("x-amzn-RequestId", rid), ("x-amzn-ErrorType", error.code))
    return Reply(error.status, body, headers, delay)


# --- the API ---------------------------------------------------------------------------------------


class AwsJsonApi:
    """Turns one AWS JSON 1.1 request into one ``Reply``; thread-safe (the backend locks for itself).

    ``faults`` may be replaced or mutated at any time; each request reads it once. With
    ``check_answers`` every answer is checked against its output shape first; one that breaks it is
    kept in ``answer_problems`` and sent as an HTTP 500 naming the problem, so a test sees it.
    """

    def __init__(
        self,
        backend: Dispatcher,
        faults: Faults | None = None,
        account: str = DEFAULT_ACCOUNT,
        *,
        check_answers: bool = False,
    ):
        self.backend = backend
        self.faults = faults if faults is not None else Faults()
        self.account = account
        self.check_answers = check_answers
        self.answer_problems: list[str] = []
        self._problems_lock = threading.Lock()

    def handle(self, target: str | None, body: bytes, authorization: str | None = None) -> Reply:
        request_id = str(uuid.uuid4())
        faults = self.faults
        delay = faults.latency_ms / 1000.0
        try:
            injected = faults.draw()
            if injected is not None:
                raise injected
            operation = operation_from_target(target)
            params = decode_body(body)
            check_model(operation, params)
            shape = operation_model(operation).input_shape
            if shape is not None:
                params = parse_timestamps(shape, params)
            result = self.backend.dispatch(
                operation, params, region=region_from_authorization(authorization), account=self.account
            )
            if self.check_answers:
                check_answer(operation, result)
            out_shape = operation_model(operation).output_shape
            payload = serialise_timestamps(out_shape, result) if out_shape is not None else {}
            return json_reply(200, payload, request_id, delay)
        except EmulatorError as exc:
            return error_reply(exc, request_id, delay)
        except AnswerShapeError as exc:
            log.error("emulator: the answer to %s breaks its output shape: %s", target, exc)
            with self._problems_lock:
                self.answer_problems.extend(exc.problems)
            bad = EmulatorError("InternalFailure", f"emulator answer breaks the output shape: {exc}", 500)
            return error_reply(bad, request_id, delay)
        except Exception:
            # A bug in the emulator must still look like AWS to the client (and be retried as a 500).
            log.exception("emulator: unhandled error for %s", target)
            internal = EmulatorError("InternalFailure", "The emulator failed on this request (see its log).", 500)
            return error_reply(internal, request_id, delay)
