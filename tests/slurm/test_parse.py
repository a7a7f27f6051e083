"""Parsing squeue/sinfo output and Slurm hostlists."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_scheduler.slurm.parse import SEP, SlurmOutputError, expand_hostlist, parse_sinfo, parse_squeue


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("", ()),
        ("(null)", ()),
        ("node1", ("node1",)),
        ("node[1-3]", ("node1", "node2", "node3")),
        ("node[01-03,7]", ("node01", "node02", "node03", "node7")),
        ("ip-10-1-2-3,ip-10-1-2-4", ("ip-10-1-2-3", "ip-10-1-2-4")),
        ("gpu[1-2],cpu1", ("gpu1", "gpu2", "cpu1")),
        ("rack[1-2]-n[1-2]", ("rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2")),
    ],
)
def test_hostlists_expand_like_slurm(text: str, names: tuple[str, ...]) -> None:
    assert expand_hostlist(text) == names


@pytest.mark.parametrize("text", ["node[1-", "node1]", "node[3-1]", "node[a-b]", "node[1-9999999]"])
def test_malformed_hostlists_are_refused_with_the_text(text: str) -> None:
    with pytest.raises(SlurmOutputError, match="hostlist"):
        expand_hostlist(text)


def _compress(prefix: str, numbers: list[int]) -> str:
    """What Slurm prints for a set of numbered nodes: ranges of consecutive numbers."""
    ranges, run = [], [numbers[0]]
    for n in numbers[1:]:
        if n == run[-1] + 1:
            run.append(n)
        else:
            ranges.append(run)
            run = [n]
    ranges.append(run)
    return prefix + "[" + ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in ranges) + "]"


@given(
    prefix=st.from_regex(r"[a-z][a-z-]{0,8}[a-z]", fullmatch=True),
    numbers=st.sets(st.integers(0, 5000), min_size=1, max_size=60),
)
def test_expanding_a_compressed_hostlist_gives_back_every_node(prefix: str, numbers: set[int]) -> None:
    ordered = sorted(numbers)
    assert expand_hostlist(_compress(prefix, ordered)) == tuple(f"{prefix}{n}" for n in ordered)


def test_squeue_lines_become_jobs_with_expanded_nodes_and_comment() -> None:
    text = SEP.join(["42", "llama train", "RUNNING", "alice", "gpu", "node[1-2]", "ckpt:s3://b/x"]) + "\n"
    text += SEP.join(["43_7", "eval", "PENDING", "bob", "gpu", "", "(null)"]) + "\n"
    first, second = parse_squeue(text)
    assert (first.job_id, first.name, first.nodes, first.comment, first.active) == (
        "42",
        "llama train",
        ("node1", "node2"),
        "ckpt:s3://b/x",
        True,
    )
    assert (second.job_id, second.nodes, second.comment, second.active) == ("43_7", (), "", False)


def test_a_squeue_line_with_missing_fields_is_refused_naming_the_line() -> None:
    with pytest.raises(SlurmOutputError, match="squeue: expected 7 fields"):
        parse_squeue("42" + SEP + "name\n")


def test_sinfo_merges_partitions_and_splits_state_flags() -> None:
    rows = [
        ["node1", "idle", "none", "ci*"],
        ["node1", "idle", "none", "gpu"],
        ["node2", "drained", "hyperpod-scheduler: scheduled stop", "gpu"],
        ["node3", "down*", "Not responding", "cpu"],
        ["node4", "idle~", "none", "cpu"],
    ]
    nodes = {n.name: n for n in parse_sinfo("\n".join(SEP.join(r) for r in rows))}
    assert nodes["node1"].partitions == ("ci", "gpu") and nodes["node1"].usable
    assert nodes["node2"].draining and nodes["node2"].reason == "hyperpod-scheduler: scheduled stop"
    assert (nodes["node3"].state, nodes["node3"].responding, nodes["node3"].usable) == ("down", False, False)
    assert (nodes["node4"].state, nodes["node4"].usable) == ("idle", False)  # powered down


# Near-valid output (separators, brackets, ranges) reaches far deeper than random unicode.
@given(st.text(alphabet=st.sampled_from([*"ab19-[],()* \n", SEP]), max_size=200))
def test_parsers_either_parse_or_raise_their_own_error(text: str) -> None:
    for parse in (parse_squeue, parse_sinfo):
        with contextlib.suppress(SlurmOutputError):
            parse(text)
