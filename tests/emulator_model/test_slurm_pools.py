"""Parsing `emulator serve --slurm CLUSTER/GROUP=NODE,...`: which local Slurm nodes back which group."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_scheduler.emulator.slurm_bridge import parse_pools

NAME = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)


def test_groups_of_several_clusters_collect_their_nodes() -> None:
    assert parse_pools(["c1/gpu=node1,node2", "c1/cpu=node3", "c2/gpu= n4 ", "c1/gpu=node5"]) == {
        "c1": {"gpu": ["node1", "node2", "node5"], "cpu": ["node3"]},
        "c2": {"gpu": ["n4"]},
    }
    assert parse_pools([]) == {}


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("c1/gpu", "expected CLUSTER/GROUP=NODE"),
        ("gpu=node1", "expected CLUSTER/GROUP=NODE"),
        ("/gpu=node1", "expected CLUSTER/GROUP=NODE"),
        ("c1/=node1", "expected CLUSTER/GROUP=NODE"),
        ("c1/gpu=node1,,node2", "expected CLUSTER/GROUP=NODE"),
        ("c1/gpu=node 1", "'node 1' is not a Slurm node name"),
        ("c1/gpu=-x", "'-x' is not a Slurm node name"),
    ],
)
def test_a_bad_value_is_named(value: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle) as err:
        parse_pools([value])
    assert repr(value) in str(err.value)


@given(st.dictionaries(st.tuples(NAME, NAME), st.lists(NAME, min_size=1, max_size=4, unique=True), max_size=4))
def test_written_pools_parse_back(pools: dict[tuple[str, str], list[str]]) -> None:
    names = [n for ns in pools.values() for n in ns]
    values = [f"{c}/{g}={','.join(ns)}" for (c, g), ns in pools.items()]
    if len(names) != len(set(names)):  # one node backing two groups is refused, naming the node
        with pytest.raises(ValueError, match="already backs"):
            parse_pools(values)
        return
    parsed = parse_pools(values)
    assert {(c, g): ns for c, groups in parsed.items() for g, ns in groups.items()} == pools
