"""The installed botocore service models, read once per process; validation of requests against them.

Every botocore session builds its own data loader, which decodes each service's JSON model again (the
SageMaker one is 14 MiB once decoded and takes a tenth of a second or more): a process with a session
per profile, per assumed role or per thread would hold one copy each. ``botocore_session()`` gives
sessions that share one loader, so each model is decoded once per process whoever asks; the loader
takes a lock around each load, so threads asking at once wait for the one decode rather than each
doing their own. Nothing else changes: the loader's search path is the one botocore would use.

``ParamValidator`` checks structure, types, required members and minimums, but not enums or
patterns; AWS checks those server-side, so we do too.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

import botocore.session
from botocore.loaders import Loader
from botocore.model import ListShape, MapShape, OperationModel, ServiceModel, Shape, StringShape, StructureShape
from botocore.validate import ParamValidator

from hyperpod_scheduler.errors import Problem

SERVICE = "sagemaker"


class _Paths(list[str]):
    """A search path that holds each folder once: every boto3 Session appends boto3's data folder to its
    loader's path, so on the shared loader a process making a session per request grew it without end
    (and every lookup of a model not loaded yet walked it)."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


class _LockedLoader(Loader):
    """botocore's loader with one lock around its loads: its cache is a plain dict, so two threads
    asking for the same model at once would both decode it."""

    def __init__(self, extra_search_paths: list[str]) -> None:
        super().__init__(extra_search_paths=extra_search_paths)
        self._load_lock = threading.RLock()
        self._search_paths = _Paths(self.search_paths)

    def load_service_model(self, *args: Any, **kwargs: Any) -> Any:
        with self._load_lock:
            return super().load_service_model(*args, **kwargs)

    def load_data(self, *args: Any, **kwargs: Any) -> Any:
        with self._load_lock:
            return super().load_data(*args, **kwargs)

    def load_data_with_path(self, *args: Any, **kwargs: Any) -> Any:
        with self._load_lock:
            return super().load_data_with_path(*args, **kwargs)


_loaders: dict[str | None, Loader] = {}
_loaders_lock = threading.Lock()


def shared_loader(data_path: str | None = None) -> Loader:
    """The process's one loader for ``data_path`` (``AWS_DATA_PATH``; None: botocore's own data)."""
    with _loaders_lock:
        if data_path not in _loaders:
            # The paths botocore's own create_loader puts in front of its defaults.
            paths = data_path.split(os.pathsep) if data_path else []
            extra = [os.path.expanduser(os.path.expandvars(p)) for p in paths]
            _loaders[data_path] = _LockedLoader(extra)
        return _loaders[data_path]


def share_models(session: botocore.session.Session) -> botocore.session.Session:
    """Give ``session`` (before it makes any client) the process's shared loader; returns it."""
    session.register_component("data_loader", shared_loader(session.get_config_variable("data_path")))
    return session


def botocore_session() -> botocore.session.Session:
    """A new botocore session (its own credentials, profile and events) reading the shared models."""
    return share_models(botocore.session.Session())


_model_lock = threading.Lock()


@functools.cache
def _service_model(service: str) -> ServiceModel:
    return botocore_session().get_service_model(service)


def service_model(service: str = SERVICE) -> ServiceModel:
    with _model_lock:  # functools.cache alone lets every thread that comes first build its own
        return _service_model(service)


@functools.cache
def operation_model(operation: str) -> OperationModel:
    return service_model().operation_model(operation)


@functools.cache
def enum_values(shape_name: str) -> tuple[str, ...]:
    """The allowed values of an enum shape, e.g. ``enum_values("ClusterInstanceType")``."""
    shape = service_model().shape_for(shape_name)
    return tuple(shape.enum) if isinstance(shape, StringShape) else ()


@functools.cache
def _pattern(expr: str) -> re.Pattern[str] | None:
    try:
        return re.compile(expr)
    except re.error:  # a Java-only construct: AWS enforces it, we cannot, so we skip it
        return None


def _group_of(path: str, params: Mapping[str, Any]) -> str | None:
    match = re.match(r"InstanceGroups\[(\d+)\]", path)
    if not match:
        return None
    groups = params.get("InstanceGroups")
    try:
        name = groups[int(match.group(1))].get("InstanceGroupName")  # type: ignore[index]
    except (IndexError, TypeError, AttributeError, KeyError):
        return None
    return name if isinstance(name, str) else None


# A check of values of one shape, compiled once from the model: the violations under a value as
# (steps, message), steps innermost first; None when there are none (the usual case, allocating nothing,
# so a request is not walked building a path string for every member it has).
_MEMBER, _INDEX, _KEY = 0, 1, 2
_Step = tuple[int, Any]
_Found = list[tuple[list[_Step], str]]
_Check = Callable[[Any], "_Found | None"]


def _under(found: _Found | None, sub: _Found, step: _Step) -> _Found:
    for steps, _ in sub:
        steps.append(step)
    if found is None:
        return sub
    found.extend(sub)
    return found


class _Memo:
    """The checks compiled so far, by shape, and the shapes being compiled (a recursive shape meets
    itself inside itself: that inner use looks its check up when it runs)."""

    def __init__(self) -> None:
        self.done: dict[int, _Check | None] = {}
        self.busy: set[int] = set()


def _compile(shape: Shape, memo: _Memo) -> _Check | None:
    """The check of ``shape``'s enum, pattern and maximum constraints, which ParamValidator does not
    make; None when nothing under it has one."""
    key = id(shape)
    if key in memo.busy:
        return lambda value: (memo.done.get(key) or _nothing)(value)
    if key not in memo.done:
        memo.busy.add(key)
        memo.done[key] = _compile_one(shape, memo)
        memo.busy.discard(key)
    return memo.done[key]


def _nothing(_: Any) -> None:
    return None


def _compile_one(shape: Shape, memo: _Memo) -> _Check | None:
    maximum = shape.metadata.get("max")
    if isinstance(shape, StructureShape):
        members = [(n, c) for n, m in shape.members.items() if (c := _compile(m, memo)) is not None]
        if not members:
            return None

        def structure(value: Any) -> _Found | None:
            if not isinstance(value, Mapping):
                return None
            found = None
            for name, check in members:
                if name in value and (sub := check(value[name])):
                    found = _under(found, sub, (_MEMBER, name))
            return found

        return structure
    if isinstance(shape, ListShape):
        item = _compile(shape.member, memo)
        if maximum is None and item is None:
            return None

        def items(value: Any) -> _Found | None:
            if not isinstance(value, list):
                return None
            found: _Found | None = None
            if maximum is not None and len(value) > maximum:
                found = [([], f"has {len(value)} items, at most {maximum} allowed")]
            if item is not None:
                for i, each in enumerate(value):
                    if sub := item(each):
                        found = _under(found, sub, (_INDEX, i))
            return found

        return items
    if isinstance(shape, MapShape):
        entry = _compile(shape.value, memo)
        if entry is None:
            return None

        def entries(value: Any) -> _Found | None:
            if not isinstance(value, Mapping):
                return None
            found = None
            for k, each in value.items():
                if sub := entry(each):
                    found = _under(found, sub, (_KEY, k))
            return found

        return entries
    if isinstance(shape, StringShape):
        enum, allowed = shape.enum, frozenset(shape.enum)
        expr = shape.metadata.get("pattern")
        compiled = _pattern(expr) if expr else None
        if not enum and maximum is None and compiled is None:
            return None

        def string(value: Any) -> _Found | None:
            if not isinstance(value, str):
                return None
            if enum and value not in allowed:
                shown = ", ".join(enum[:8]) + (", ..." if len(enum) > 8 else "")
                return [([], f"unknown value {value!r} (allowed: {shown})")]
            found: _Found | None = None
            if maximum is not None and len(value) > maximum:
                found = [([], f"is {len(value)} characters long, at most {maximum} allowed")]
            if compiled is not None and not compiled.fullmatch(value):
                found = (found or []) + [([], f"value {value!r} does not match the pattern {expr}")]
            return found

        return string
    if shape.type_name in ("integer", "long") and maximum is not None:

        def integer(value: Any) -> _Found | None:
            if isinstance(value, int) and not isinstance(value, bool) and value > maximum:
                return [([], f"value {value} is above the maximum {maximum}")]
            return None

        return integer
    return None


@functools.cache
def _value_check(operation: str) -> _Check | None:
    shape = operation_model(operation).input_shape
    return None if shape is None else _compile(shape, _Memo())


def _path(steps: list[_Step]) -> str:
    path = ""
    for kind, part in reversed(steps):
        if kind == _MEMBER:
            path = f"{path}.{part}" if path else str(part)
        elif kind == _INDEX:
            path = f"{path}[{part}]"
        else:
            path = f"{path}.{part}"
    return path


def _walk_values(operation: str, value: Any) -> list[tuple[str, str]]:
    """Enum, pattern and maximum violations of ``value`` as ``operation``'s input, as (path, message)."""
    check = _value_check(operation)
    found = None if check is None else check(value)
    return [(_path(steps), message) for steps, message in found or ()]


_REPORT_LINE = re.compile(r"^(?:Invalid|Missing|Unknown)[^\"]*\"?(?P<body>.*)$")


# The request validate_request last passed on this thread, by its input shape's name: botocore's client
# runs the same ParamValidator over the same dict when it is sent (``checked_already``).
_passed = threading.local()


def checked_already(shape: Shape, params: Mapping[str, Any]) -> bool:
    """Whether ``params`` equals, member for member, the request ``validate_request`` last passed on
    this thread as the input ``shape``. Asked once: the answer forgets that request, so only the call
    that sends it right after its check (``engine.update_request`` then ``acting.send``) is let through;
    anything else (another request, one changed since, another thread's) is validated by botocore."""
    last = getattr(_passed, "last", None)
    _passed.last = None
    return last is not None and last[0] == shape.name and last[1] == params


def validate_request(operation: str, params: Mapping[str, Any]) -> list[Problem]:
    """All model violations of ``params`` as the input of ``operation``; empty when valid."""
    shape = operation_model(operation).input_shape
    if shape is None:
        return []
    problems: list[Problem] = []
    try:
        report = ParamValidator().validate(params, shape)
    except (RuntimeError, OverflowError, ValueError) as exc:
        # botocore raises instead of reporting on some values (a timestamp past year 9999).
        return [Problem(field=operation, message=f"invalid request value: {exc}")]
    if report.has_errors():
        for line in report.generate_report().splitlines():
            text = line.strip()
            if not text:
                continue
            path = _path_in_report_line(text)
            problems.append(Problem(field=path or operation, message=text, group=_group_of(path, params)))
    for path, message in _walk_values(operation, params):
        problems.append(Problem(field=path, message=message, group=_group_of(path, params)))
    _passed.last = None if problems else (shape.name, params)
    return problems


def _path_in_report_line(line: str) -> str:
    # botocore lines look like: Invalid type for parameter InstanceGroups[0].InstanceCount, value: ...
    # or: Missing required parameter in InstanceGroups[0]: "ExecutionRole"
    # or: Unknown parameter in InstanceGroups[0]: "Foo", must be one of: ...
    m = re.search(r"parameter (?:in )?(?P<path>[A-Za-z0-9_.\[\]]+)", line)
    if m is None:
        m = re.search(r"in (?P<path>[A-Za-z0-9_.\[\]]+):", line)
    if m is None:
        return ""
    path = m.group("path").rstrip(",:")
    extra = re.search(r'(?:required parameter in [^:]+|Unknown parameter in [^:]+): "(?P<name>[^"]+)"', line)
    if extra and path not in ("input",):
        return f"{path}.{extra.group('name')}"
    if extra:
        return extra.group("name")
    return path
