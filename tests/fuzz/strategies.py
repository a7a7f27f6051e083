"""Hypothesis strategies built from the product's own descriptions of its inputs, then broken.

- ``from_shape``: values for a botocore output shape (structures with their required members and some
  optional ones, enums from the model, counts within their min/max, timestamps, blobs);
- ``from_schema``: documents for a pydantic model's JSON schema (the config and the cluster spec);
- ``broken``: one node of a good value replaced by junk (wrong kind, huge, NaN, nested deep, hostile
  text) or removed, or an unknown member added;
- ``damaged_bytes``: an encoded document truncated, made invalid UTF-8, given a BOM or an HTML page,
  emptied, or nested 100,000 deep.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from botocore.model import ListShape, MapShape, Shape, StringShape, StructureShape
from hypothesis import strategies as st

# ---- from botocore shapes ---------------------------------------------------------------------------

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_NAME = st.from_regex(r"\A[a-zA-Z0-9](-?[a-zA-Z0-9]){0,10}\Z")


def _string(shape: StringShape) -> st.SearchStrategy[str]:
    if shape.enum:
        return st.sampled_from(list(shape.enum))
    if shape.name in ("ClusterName", "ClusterInstanceGroupName", "String", "EntityName"):
        return _NAME
    if shape.name.endswith("Arn"):
        return st.just("arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefghij12")
    return _TEXT


def from_shape(shape: Shape, depth: int = 0) -> st.SearchStrategy[Any]:
    """A JSON value botocore's parser would accept for ``shape`` (nesting stops at a few levels)."""
    if isinstance(shape, StructureShape):
        if shape.is_tagged_union:  # exactly one member, as the model says
            return st.one_of(
                [st.builds(lambda v, k=k: {k: v}, from_shape(m, depth + 1)) for k, m in shape.members.items()]
            )
        required = set(shape.required_members)
        members = dict(shape.members)
        if depth > 4:
            members = {k: v for k, v in members.items() if k in required}
        fixed = {k: from_shape(v, depth + 1) for k, v in members.items() if k in required}
        optional = {k: from_shape(v, depth + 1) for k, v in members.items() if k not in required}
        return st.fixed_dictionaries(fixed, optional=optional)
    if isinstance(shape, ListShape):
        return st.lists(from_shape(shape.member, depth + 1), max_size=0 if depth > 4 else 3)
    if isinstance(shape, MapShape):
        return st.dictionaries(_TEXT, from_shape(shape.value, depth + 1), max_size=0 if depth > 4 else 2)
    if isinstance(shape, StringShape):
        return _string(shape)
    kind = shape.type_name
    if kind in ("integer", "long"):
        low = int(shape.metadata.get("min", 0))
        return st.integers(low, int(shape.metadata.get("max", low + 6758)))
    if kind in ("float", "double"):
        return st.floats(0, 1e6, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "timestamp":
        return st.one_of(st.floats(1e9, 2e9), st.just("2026-12-01T08:00:00Z"))
    if kind == "blob":
        return st.binary(max_size=8).map(lambda b: base64.b64encode(b).decode())
    return st.none()


# ---- from pydantic JSON schemas ----------------------------------------------------------------------


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Documents valid for most of ``schema`` (a pydantic model's JSON schema): objects with some of their
    properties, enums and literals, numbers within their bounds, $refs followed a few levels."""
    defs = schema.get("$defs", {})

    def build(node: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            return build(target, depth + 1) if depth < 6 else st.just({})
        if "const" in node:
            return st.just(node["const"])
        if "enum" in node:
            return st.sampled_from(node["enum"])
        for key in ("anyOf", "oneOf", "allOf"):
            if key in node:
                return st.one_of([build(n, depth) for n in node[key]])
        kind = node.get("type")
        if kind == "object":
            props = node.get("properties", {})
            optional = {k: build(v, depth + 1) for k, v in props.items() if k not in node.get("required", [])}
            fixed = {k: build(v, depth + 1) for k, v in props.items() if k in node.get("required", [])}
            extra = node.get("additionalProperties")
            if not props and isinstance(extra, dict):
                return st.dictionaries(_NAME, build(extra, depth + 1), max_size=2)
            return st.fixed_dictionaries(fixed, optional=optional)
        if kind == "array":
            items = node.get("items", {})
            return st.lists(build(items, depth + 1) if items else st.integers(0, 3), max_size=3)
        if kind == "string":
            return st.one_of(_NAME, st.sampled_from(["Mon-Fri 08:00-18:00 UTC", "always", "never", "us-east-1"]))
        if kind in ("number", "integer"):
            low = node.get("minimum", node.get("exclusiveMinimum", 0))
            high = node.get("maximum", low + 1000)
            return st.integers(math.ceil(low) + 1, int(high)) if kind == "integer" else st.floats(low + 1, high)
        if kind == "boolean":
            return st.booleans()
        if kind == "null":
            return st.none()
        return st.one_of(st.none(), st.integers(0, 3), _NAME)

    return build(schema, 0)


# ---- breaking ----------------------------------------------------------------------------------------

HOSTILE_TEXT = [
    "", " ", "x" * 5000, "\x00", "\x1b[2J\x1b[31mred", "line\nbreak\r", "\u202eevil", "gr\u00fcn", "a/b", "-x",
    "yesterday", "2", "0", "true", "null", "NaN", "[/]", "[bold]x", "{{ 7*7 }}", "<script>x</script>", "%s%n",
    "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefghij12", "../../etc/passwd", "\ud800",
]  # fmt: skip
JUNK: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([-1, 0, 1, 2**31, 2**63, 2**70, -(2**64), 10**400 // 10**300]),
    st.sampled_from([1.5, -0.0, 1e308, -1e308, math.inf, -math.inf, math.nan]),
    st.sampled_from(HOSTILE_TEXT),
    st.just([]),
    st.just({}),
    st.just([1, 2, 3]),
    st.just({"a": {"b": {"c": [1]}}}),
    st.integers(1, 80).map(lambda n: json.loads("[" * n + "]" * n)),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any, drop: bool) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        copy = dict(value)
        if not rest and drop:
            copy.pop(head, None)
        elif not rest:
            copy[head] = new
        else:
            copy[head] = _replace(value[head], rest, new, drop)
        return copy
    copy_list = list(value)
    if not rest and drop:
        copy_list.pop(head)
    else:
        copy_list[head] = _replace(value[head], rest, new, drop)
    return copy_list


@st.composite
def broken(draw: st.DrawFn, good: st.SearchStrategy[Any]) -> Any:
    """A good value with one thing wrong with it: a node replaced or removed, or an unknown key added."""
    value = draw(good)
    paths = _paths(value)[1:] or [()]  # the root itself only when there is nothing inside
    path = draw(st.sampled_from(paths))
    how = draw(st.sampled_from(["replace", "replace", "drop", "add"]))
    if how == "add":
        target = path if isinstance(_get(value, path), dict) else ()
        if not isinstance(_get(value, target), dict):
            return draw(JUNK)
        return _replace(value, (*target, draw(st.sampled_from(["NewMember", "webhok", "0", ""]))), draw(JUNK), False)
    if how == "drop" and path:
        return _replace(value, path, None, True)
    return _replace(value, path, draw(JUNK), False)


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        value = value[p]
    return value


def encode(value: Any) -> bytes:
    """JSON as a careless server writes it: NaN and Infinity allowed, lone surrogates kept."""
    return json.dumps(value, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass")


@st.composite
def damaged_bytes(draw: st.DrawFn, good: bytes) -> bytes:
    kinds = ["as-is"] * 6 + ["truncate", "bad-utf8", "bom", "html", "empty", "deep", "junk-tail"]
    how = draw(st.sampled_from(kinds))
    if how == "truncate" and good:
        return good[: draw(st.integers(0, len(good) - 1))]
    if how == "bad-utf8" and good:
        at = draw(st.integers(0, len(good)))
        return good[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"])) + good[at:]
    if how == "bom":
        return b"\xef\xbb\xbf" + good
    if how == "html":
        return b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    if how == "empty":
        return draw(st.sampled_from([b"", b" ", b"\n", b"null", b"[]", b'""', b"0"]))
    if how == "deep":
        n = draw(st.sampled_from([65, 1000, 100_000]))
        return b'{"a": ' + b"[" * n + b"]" * n + b"}"
    if how == "junk-tail":
        return good + b"}}]garbage"
    return good
