"""The bounded reader: what it refuses, that it refuses it before building anything big, and that every
ordinary document reads exactly as PyYAML / json read it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.inputs.bounded import (
    BadDocument,
    Limits,
    MissingFile,
    json_depth,
    load_json,
    load_yaml,
    read_bytes,
    read_yaml,
)


def billion_laughs(levels: int = 9) -> str:
    """The classic alias bomb: 9 ** levels strings from a few hundred bytes."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_once_naming_the_line() -> None:
    bomb = billion_laughs()
    assert len(bomb) < 500
    started = time.perf_counter()
    with pytest.raises(BadDocument, match=r"spec.yaml: line \d+, column \d+: more than 250,000 values once aliases"):
        load_yaml(bomb, "spec.yaml")
    assert time.perf_counter() - started < 5  # refused while composing, not after expanding 387 million strings


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a: &a [*a]\n", "a recursive alias"),
        ("? [a, b]\n: 1\n", "a mapping key must be a plain value"),
        ("? {a: 1}\n: 1\n", "a mapping key must be a plain value"),
        ("a: 1\nb: 2\na: 3\n", "line 3, column 1: duplicate key 'a'"),
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 64 levels deep"),
        ("x: !!python/object/apply:os.system [true]\n", "the YAML tag '!!python/object/apply:os.system'"),
        # issue 28: an explicit tag made PyYAML crash (AttributeError, KeyError: exit 70) or build a set
        ("x: !!timestamp x\n", "line 1, column 4: the YAML tag '!!timestamp' is not accepted"),
        ("x: !!bool maybe\n", "the YAML tag '!!bool' is not accepted"),
        ("x: !!int abc\n", "the YAML tag '!!int'"),
        ("x: !!set {a}\n", "the YAML tag '!!set'"),
        ("x: !!binary AAAA\n", "the YAML tag '!!binary'"),
        ("x: !custom 1\n", "the YAML tag '!custom'"),
        ("x: ! 1\n", "the YAML tag '!'"),
        ("!!map {a: 1}\n", "line 1, column 1: the YAML tag '!!map'"),
        ("%TAG !e! tag:example.com,2000:\n---\nx: !e!a 1\n", "the YAML tag 'tag:example.com,2000:a'"),
        ("a: [1, 2\n", "invalid YAML"),
        ("when: 2026-02-30\n", "invalid YAML value"),
        ("n: " + "1" * 5000 + "\n", "invalid YAML value"),
        ("bell: \x07\n", "unacceptable character #x0007"),
    ],
)
def test_hostile_yaml_is_one_line_naming_the_problem(text: str, said: str) -> None:
    with pytest.raises(BadDocument) as caught:
        load_yaml(text, "f.yaml")
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_flow_collections_nested_to_the_limit_read_and_one_more_is_refused() -> None:
    # The scanner refuses a flow collection opened past the limit before the composer counts nodes
    # (the read-ahead to its end was quadratic): the same limit either way, block nesting included.
    assert load_yaml("[" * 64 + "]" * 64, "f.yaml") == json.loads("[" * 64 + "]" * 64)
    assert load_yaml("a:\n  b: " + "[" * 62 + "]" * 62 + "\n", "f.yaml")["a"]["b"] == json.loads("[" * 62 + "]" * 62)
    for deep in ("[" * 65 + "]" * 65, "a:\n  b: " + "[" * 63 + "]" * 63 + "\n", "{a: " * 65 + "1" + "}" * 65):
        with pytest.raises(BadDocument, match="nested more than 64 levels deep"):
            load_yaml(deep, "f.yaml")


def test_more_aliases_than_allowed_are_refused() -> None:
    text = "x: &x 1\nl: [" + ", ".join(["*x"] * 300) + "]\n"
    with pytest.raises(BadDocument, match="more than 256 aliases"):
        load_yaml(text, "f.yaml")
    assert load_yaml(text, "f.yaml", Limits(max_aliases=300))["l"] == [1] * 300


def test_merge_keys_may_be_overridden_but_written_keys_not_repeated() -> None:
    text = "base: &b {k: 1, j: 2}\nuse: {<<: *b, k: 3}\n"
    assert load_yaml(text, "f.yaml")["use"] == {"k": 3, "j": 2}


def test_not_utf8_names_line_and_column() -> None:
    with pytest.raises(BadDocument, match=r"line 2, column 4: not UTF-8 text \(byte 0xff\)"):
        load_yaml(b"a: 1\nb: \xff\n", "f.yaml")
    assert load_yaml(b"\xef\xbb\xbfa: 1\n", "f.yaml") == {"a": 1}  # a byte-order mark is fine


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: 1\n" + b"#" * 5000)
    with pytest.raises(BadDocument, match="larger than 4096 bytes; refused unread"):
        read_bytes(big, limits=Limits(max_bytes=4096))
    with pytest.raises(MissingFile, match="no such file"):
        read_yaml(tmp_path / "absent.yaml")
    with pytest.raises(BadDocument, match="is a folder"):
        read_yaml(tmp_path)
    with pytest.raises(BadDocument, match="cannot read"):
        read_yaml("nul\x00byte.yaml")


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"[" * 200_000 + b"]" * 200_000, "nested 200000 levels deep (at most 64)"),
        (b'{"a": NaN}', "not JSON: NaN is not a JSON number"),
        (b'{"a": Infinity}', "not JSON: Infinity is not a JSON number"),
        (b'{"a": "\\ud800"}', "lone surrogate"),
        (b'{"a": "caf\xe9"}', "not UTF-8 text (byte 0xe9)"),
        (b'{"a": ' + b"9" * 5000 + b"}", "not JSON: Exceeds the limit"),
        (b'{"a": 1', "line 1, column 8: not JSON: Expecting ',' delimiter"),
    ],
)
def test_hostile_json_is_one_line(body: bytes, said: str) -> None:
    with pytest.raises(BadDocument) as caught:
        load_json(body, "answer")
    assert said in str(caught.value)


def test_json_depth_ignores_brackets_inside_strings() -> None:
    assert json_depth(b'{"a": "[[[[[[", "b": ["x\\"]]]]"]}') == 2
    assert load_json(b'{"a": "' + b"[" * 100 + b'"}', "t") == {"a": "[" * 100}


# ---- ordinary documents read exactly as the standard parsers read them ------------------------------

plain = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(10**12), 10**12), st.text(max_size=12)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(min_size=1, max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(plain)
def test_ordinary_documents_read_as_the_standard_parsers_read_them(value: Any) -> None:
    as_json = json.dumps(value)
    assert load_json(as_json, "t") == json.loads(as_json)
    as_yaml = yaml.safe_dump(value)
    assert load_yaml(as_yaml, "t") == yaml.safe_load(as_yaml)
