"""Readiness after a start: the nodes joined Slurm and take work (sinfo), not just Running in the API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hyperpod_scheduler.agent.audit import nodes_for
from hyperpod_scheduler.agent.messages import GroupReadiness, NodeSelector
from hyperpod_scheduler.slurm.commands import Slurm
from hyperpod_scheduler.slurm.model import SlurmNode


def readiness(
    groups: Mapping[str, NodeSelector], expected: Mapping[str, int], nodes: Sequence[SlurmNode]
) -> tuple[bool, dict[str, GroupReadiness]]:
    """Pure: per group, how many of the expected nodes Slurm lists and how many are idle or allocated.
    Ready when every group has at least its expected count usable (a group with no selector cannot be
    checked and counts as not ready)."""
    per_group, _ = nodes_for(groups, nodes)
    by_name = {n.name: n for n in nodes}
    out: dict[str, GroupReadiness] = {}
    for group, want in expected.items():
        names = per_group.get(group, [])
        usable = [n for n in names if by_name[n].usable]
        out[group] = GroupReadiness(
            expected=want,
            joined=len(names),
            usable=len(usable),
            not_ready=[f"{n} ({by_name[n].state}{by_name[n].flags})" for n in names if not by_name[n].usable],
        )
    return all(r.usable >= r.expected for r in out.values()), out


class ReadinessProbe:
    """``probe(groups, expected)`` -> (ready, per group). For the scheduler on the controller; from
    elsewhere, post a start intent and read the verdict's ``ready`` and ``readiness``."""

    def __init__(self, slurm: Slurm) -> None:
        self.slurm = slurm

    def __call__(
        self, groups: Mapping[str, NodeSelector], expected: Mapping[str, int]
    ) -> tuple[bool, dict[str, GroupReadiness]]:
        return readiness(groups, expected, self.slurm.nodes())
