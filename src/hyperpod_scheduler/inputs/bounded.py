"""The one reader for every YAML and JSON document the product reads (config, specs, schedules, settings,
price files, AWS answers): size, encoding, depth, aliases and keys are checked before objects are built.

PyYAML's ``safe_load`` shares an aliased node instead of copying it, so a 431-byte "billion laughs"
file loads quickly and then explodes in whatever walks it (pydantic, ``json.dumps``, a deep copy); it
also accepts a recursive alias (``&a [*a]``) and a list as a mapping key, and its composer recurses,
so a file nested 5,000 deep ends in ``RecursionError``. Here the composer counts: nesting depth, the
number of aliases, and the number of nodes *with every alias expanded*, and refuses a document over
any limit with one line naming the source and the line. JSON gets the same depth check by a scan of
its brackets before ``json.loads`` builds anything.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import files
from hyperpod_scheduler.inputs.text import quoted

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """How big a document may be. The defaults are far above any real config or spec (a 1,000-cluster
    config is about 20,000 nodes and 10 levels deep) and far below what hurts."""

    max_bytes: int = 4 * MiB
    max_depth: int = 64
    max_aliases: int = 256
    max_nodes: int = 250_000  # counted with every alias expanded


FILES = Limits()


class BadDocument(UsageError):
    """A document refused before or while it was read: ``source``, where in it (``line 3: ``), and why."""

    def __init__(self, source: str, problem: str, where: str = "", kind: str = "") -> None:
        self.source = source
        self.problem = problem  # without the kind: "duplicate key 'a'"
        self.where = where
        super().__init__(f"{source}: {where}{kind}{problem}")


class Unreadable(BadDocument):
    """The file could not be read at all (missing, a folder, no permission): nothing of it was parsed."""


class MissingFile(Unreadable):
    """The file is not there (callers that treat a missing file differently catch this one)."""


# ---- bytes and text -------------------------------------------------------------------------------


def read_bytes(path: str | Path, source: str | None = None, limits: Limits = FILES) -> bytes:
    """The file's bytes, refused unread when larger than ``limits.max_bytes``."""
    p = Path(path)
    label = source or str(p)
    try:
        # A regular file only: a FIFO would block the open for ever, /dev/zero never end (inputs/files.py).
        with files.open_input(p) as handle:
            data = handle.read(limits.max_bytes + 1)  # never more than the limit, whatever stat says
    except FileNotFoundError:
        raise MissingFile(label, "no such file") from None
    except IsADirectoryError:
        raise Unreadable(label, "is a folder, not a file") from None
    except files.NotRegular as exc:
        problem = "is a folder, not a file" if exc.what == "a folder" else f"is {exc.what}, not a regular file"
        raise Unreadable(label, f"{problem}; refused unread") from None
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL byte
        raise Unreadable(label, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    if len(data) > limits.max_bytes:
        raise BadDocument(label, f"larger than {_size(limits.max_bytes)}; refused unread")
    return data


class _Readable(Protocol):
    def read(self, amt: int = ...) -> bytes: ...


def read_stream(stream: _Readable, source: str, limits: Limits = FILES) -> bytes:
    """At most ``limits.max_bytes`` of a stream (an S3 object's body); more is refused, not read."""
    data = stream.read(limits.max_bytes + 1)
    if len(data) > limits.max_bytes:
        raise BadDocument(source, f"larger than {_size(limits.max_bytes)}; refused")
    return bytes(data)


def decode(data: bytes | str, source: str, limits: Limits = FILES) -> str:
    """Strict UTF-8 (a byte-order mark is allowed), with the line and column of the first bad byte."""
    if isinstance(data, str):
        text = data
        if len(text) > limits.max_bytes:
            raise BadDocument(source, f"larger than {_size(limits.max_bytes)}; refused")
    else:
        if len(data) > limits.max_bytes:
            raise BadDocument(source, f"larger than {_size(limits.max_bytes)}; refused")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line, column = _position(data, exc.start)
            raise BadDocument(
                source, f"not UTF-8 text (byte 0x{data[exc.start]:02x})", f"line {line}, column {column}: "
            ) from None
    lone = _SURROGATE.search(text)
    if lone is not None:
        raise BadDocument(source, "not valid Unicode (a lone surrogate)")
    return text


_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(
    rb"\\u[dD][89abcdefABCDEF]"
)  # may also match an escaped backslash: then the walk decides


def _position(data: bytes, offset: int) -> tuple[int, int]:
    before = data[:offset]
    return before.count(b"\n") + 1, offset - (before.rfind(b"\n") + 1) + 1


def _size(n: int) -> str:
    return f"{n / MiB:g} MiB" if n >= MiB else f"{n} bytes"


# ---- YAML -------------------------------------------------------------------------------------------


class _Counting(yaml.SafeLoader):
    """A SafeLoader whose composer keeps count, and whose mappings refuse duplicate and non-scalar keys."""

    limits: Limits = FILES

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0
        self._nodes = 0
        self._sizes: dict[Node, int] = {}  # expanded node count of every finished node

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if node is None:
                return None
            self._aliases += 1
            if self._aliases > self.limits.max_aliases:
                raise _Refused(f"more than {self.limits.max_aliases} aliases", mark)
            size = self._sizes.get(node)
            if size is None:  # the anchor is still being composed: the alias is inside itself
                raise _Refused("a recursive alias (an anchor used inside itself)", mark)
            self._count(size, mark)
            return node
        tag = getattr(self.peek_event(), "tag", None)  # type: ignore[no-untyped-call]
        if tag is not None:
            # An explicit tag makes PyYAML build what the tag says, or crash trying (`!!timestamp x` raises
            # AttributeError, `!!bool maybe` KeyError); no file of ours needs one, so none is accepted.
            shown = quoted(tag.replace(_STANDARD_TAG, "!!"), 40)
            raise _Refused(f"the YAML tag {shown} is not accepted (write the value without a tag)", mark)
        self._depth += 1
        if self._depth > self.limits.max_depth:
            raise _Refused(f"nested more than {self.limits.max_depth} levels deep", mark)
        before = self._nodes
        node = super().compose_node(parent, index)
        self._depth -= 1
        if node is None:
            return None
        self._count(1, mark)
        self._sizes[node] = self._nodes - before
        return node

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        # The scanner reads ahead of the composer to the end of every flow collection that may be a
        # simple key, and looks at each open level for every token on the way: 5,000 '[' took two seconds
        # to reach the composer's depth check. A flow collection opened at this level is a node deeper
        # than the limit whatever encloses it (each open flow collection is one of its ancestors), so the
        # document is refused here with the composer's own words, before the quadratic read-ahead.
        if self.flow_level >= self.limits.max_depth:
            raise _Refused(f"nested more than {self.limits.max_depth} levels deep", self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    def _count(self, n: int, mark: yaml.Mark) -> None:
        self._nodes += n
        if self._nodes > self.limits.max_nodes:
            raise _Refused(f"more than {self.limits.max_nodes:,} values once aliases are expanded", mark)


class _Refused(yaml.YAMLError):
    def __init__(self, problem: str, mark: yaml.Mark | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


def _mapping(loader: _Counting, node: MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:  # the keys as written; merged ones (<<) may be overridden
        if not isinstance(key_node, ScalarNode):
            raise _Refused("a mapping key must be a plain value, not a list or mapping", key_node.start_mark)
        if key_node.tag == _MERGE:
            continue
        key = loader.construct_object(key_node)
        if key in seen:
            raise _Refused(f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    loader.flatten_mapping(node)
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, ScalarNode):  # a merged mapping's own keys are checked here
            raise _Refused("a mapping key must be a plain value, not a list or mapping", key_node.start_mark)
        out[loader.construct_object(key_node)] = loader.construct_object(value_node, deep=True)
    return out


_MERGE = "tag:yaml.org,2002:merge"
_STANDARD_TAG = "tag:yaml.org,2002:"
_Counting.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_yaml(data: bytes | str, source: str, limits: Limits = FILES) -> Any:
    """One YAML document (JSON is YAML), or ``BadDocument`` naming the line and the problem."""
    text = decode(data, source, limits)
    loader: _Counting | None = None
    try:
        loader = _Counting(text)  # the reader refuses non-printable characters here already
        loader.limits = limits
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BadDocument(source, problem, where, "" if isinstance(exc, _Refused) else "invalid YAML: ") from None
    except (ValueError, OverflowError) as exc:  # a timestamp or number PyYAML cannot represent
        raise BadDocument(source, f"invalid YAML value: {str(exc).split(':')[0]}") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml(path: str | Path, source: str | None = None, limits: Limits = FILES) -> Any:
    label = source or str(path)
    return load_yaml(read_bytes(path, label, limits), label, limits)


# ---- JSON -------------------------------------------------------------------------------------------

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_depth(data: bytes) -> int:
    """How deeply ``data`` nests, from its brackets outside strings (no objects are built)."""
    brackets = _STRING.sub(b'""', data).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(_STEP[b] for b in brackets), default=0)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def load_json(data: bytes | str, source: str, limits: Limits = FILES) -> Any:
    """One JSON document, or ``BadDocument``: size and depth are checked before it is decoded."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > limits.max_bytes:
        raise BadDocument(source, f"larger than {_size(limits.max_bytes)}; refused")
    # A document cannot nest deeper than it has opening brackets: counting them is quick, and most
    # documents (every ordinary API answer) have fewer than the limit, so the walk is skipped.
    if raw.count(b"[") + raw.count(b"{") > limits.max_depth:
        depth = json_depth(raw)
        if depth > limits.max_depth:
            raise BadDocument(source, f"nested {depth} levels deep (at most {limits.max_depth})")
    text = decode(raw, source, limits)
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise BadDocument(source, exc.msg, f"line {exc.lineno}, column {exc.colno}: ", "not JSON: ") from None
    except (ValueError, RecursionError) as exc:  # NaN/Infinity, or an integer of more than 4,300 digits
        raise BadDocument(source, str(exc).split(":")[0], kind="not JSON: ") from None
    # The text itself holds no surrogate (decode checked), so one can only come from an escape.
    if _ESCAPED_SURROGATE.search(raw) is not None and _has_surrogate(value):
        raise BadDocument(source, "not valid Unicode (a lone surrogate escaped as \\udXXX)")
    return value


def _has_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def read_json(path: str | Path, source: str | None = None, limits: Limits = FILES) -> Any:
    label = source or str(path)
    return load_json(read_bytes(path, label, limits), label, limits)
