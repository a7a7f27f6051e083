"""Parsers for the machine-readable output of squeue and sinfo (pure).

Debian 12 ships Slurm 22.05, whose ``--json`` needs an optional plugin, so the commands print chosen
fields with ``-o`` separated by the ASCII unit separator (0x1F), which no job name or comment holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hyperpod_scheduler.slurm.model import NODE_STATE_FLAGS, SlurmJob, SlurmNode

SEP = "\x1f"
# squeue -o: job id, name, state, user, partition, node list, comment.
SQUEUE_FORMAT = SEP.join(("%i", "%j", "%T", "%u", "%P", "%N", "%k"))
# sinfo -N -o: one line per node and partition: name, long state, reason, partition.
SINFO_FORMAT = SEP.join(("%N", "%T", "%E", "%P"))
MAX_HOSTS = 100_000  # a hostlist wider than any cluster is a typo, not a request to allocate millions

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


class SlurmOutputError(ValueError):
    """Output we cannot read; the message names the command and the offending text."""


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets: ``a[1-2],b`` -> ``['a[1-2]', 'b']``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise SlurmOutputError(f"hostlist '{text}': ']' without '['")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise SlurmOutputError(f"hostlist '{text}': '[' without ']'")
    parts.append(text[start:])
    return [p for p in parts if p]


def _expand_one(expr: str, budget: int) -> list[str]:
    open_at = expr.find("[")
    if open_at < 0:
        return [expr]
    close_at = expr.index("]", open_at)
    head, body, tail = expr[:open_at], expr[open_at + 1 : close_at], expr[close_at + 1 :]
    values: list[str] = []
    for item in body.split(","):
        match = _RANGE.match(item.strip())
        if not match:
            raise SlurmOutputError(f"hostlist '{expr}': '{item}' is not a number or a range")
        low_text, high_text = match.group(1), match.group(2) or match.group(1)
        low, high = int(low_text), int(high_text)
        if high < low:
            raise SlurmOutputError(f"hostlist '{expr}': range '{item}' runs backwards")
        if high - low + len(values) > budget:
            raise SlurmOutputError(f"hostlist '{expr}': more than {MAX_HOSTS} names")
        width = len(low_text)  # "01-10" keeps its zero padding
        values.extend(str(n).zfill(width) for n in range(low, high + 1))
    # The tail may hold another bracket (multi-dimensional names): expand it for each value.
    tails = _expand_one(tail, budget)
    if len(values) * len(tails) > budget:
        raise SlurmOutputError(f"hostlist '{expr}': more than {MAX_HOSTS} names")
    return [f"{head}{v}{t}" for v in values for t in tails]


def expand_hostlist(text: str) -> tuple[str, ...]:
    """``node[01-03,7],gpu1`` -> ``('node01', 'node02', 'node03', 'node7', 'gpu1')``; empty for ``''``
    and for squeue's ``(null)`` / ``n/a``."""
    text = text.strip()
    if text in ("", "(null)", "n/a", "N/A", "None assigned"):
        return ()
    names: list[str] = []
    for part in _split_top(text):
        names.extend(_expand_one(part, MAX_HOSTS - len(names)))
    return tuple(names)


def _fields(line: str, count: int, command: str) -> list[str]:
    fields = line.split(SEP)
    if len(fields) != count:
        raise SlurmOutputError(f"{command}: expected {count} fields, got {len(fields)} in line {line!r}")
    return fields


def parse_squeue(text: str) -> list[SlurmJob]:
    """Jobs from ``squeue -h -o SQUEUE_FORMAT``."""
    jobs = []
    for line in _lines(text):
        job_id, name, state, user, partition, nodes, comment = _fields(line, 7, "squeue")
        if not job_id.strip():
            raise SlurmOutputError(f"squeue: empty job id in line {line!r}")
        jobs.append(
            SlurmJob(
                job_id=job_id.strip(),
                name=name,
                state=state.strip().upper(),
                user=user.strip(),
                partition=partition.strip(),
                nodes=expand_hostlist(nodes),
                comment="" if comment == "(null)" else comment,
            )
        )
    return jobs


def parse_sinfo(text: str) -> list[SlurmNode]:
    """Nodes from ``sinfo -h -N -o SINFO_FORMAT``; a node listed once per partition comes back once."""
    by_name: dict[str, SlurmNode] = {}
    for line in _lines(text):
        name, state_text, reason, partition = _fields(line, 4, "sinfo")
        name = name.strip()
        state_text = state_text.strip().lower()
        state = state_text.rstrip(NODE_STATE_FLAGS)
        if not name or not state:
            raise SlurmOutputError(f"sinfo: no node name or state in line {line!r}")
        # The default partition carries a '*' in sinfo's %P.
        part = partition.strip().rstrip("*")
        known = by_name.get(name)
        parts = (*known.partitions, part) if known else (part,)
        by_name[name] = SlurmNode(
            name=name,
            state=state,
            flags=state_text[len(state) :],
            reason="" if reason.strip() == "none" else reason.strip(),
            partitions=tuple(p for p in dict.fromkeys(parts) if p),
        )
    return list(by_name.values())


def _lines(text: str) -> Iterable[str]:
    return (line for line in text.splitlines() if line.strip())
