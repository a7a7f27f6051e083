"""The phases of a start, per group, from what a look at the cluster found. Pure: the look is passed in.

A node's status says *whether* it passed a phase (ListClusterNodes: Pending, DeepHealthCheckInProgress,
Running); its launch time and, in Continuous mode, the cluster's events say *when*. A group passed a
phase at the moment its ``target``-th node did. Without node times for a phase (no events: not
Continuous mode, or the events could not be read) the time is that of the first look that saw it, and
the group's ``source`` says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from hyperpod_scheduler.store.records import GroupPhases, PhaseSource, StartPhase

# ListClusterNodes statuses that mean a node has passed lifecycle setup / is up.
_CHECKING = "DeepHealthCheckInProgress"
_UP = "Running"
_SETUP = frozenset({"Pending"})


@dataclass(frozen=True)
class NodeSeen:
    group: str
    instance_id: str
    status: str
    launched: datetime | None


@dataclass(frozen=True)
class NodeEvent:
    """A cluster event about one instance that marks a phase: ``checks`` (deep health checks began, so
    lifecycle setup passed) or ``running``."""

    instance_id: str
    at: datetime
    marks: str  # "checks" | "running"


@dataclass(frozen=True)
class Look:
    """One look at a starting cluster. ``nodes`` None: ListClusterNodes was not available (counts
    from DescribeCluster only); ``events`` None: no cluster events (not Continuous mode, or unreadable)."""

    at: datetime
    currents: Mapping[str, int]
    nodes: Sequence[NodeSeen] | None
    events: Sequence[NodeEvent] | None
    note: str = ""


def begin(
    targets: Mapping[str, int], previous: Mapping[str, int], checks: Mapping[str, bool], at: datetime
) -> dict[str, GroupPhases]:
    """The phases of a start just sent: every group it raises, requested at ``at``."""
    return {
        g: GroupPhases(group=g, target=t, checks=checks.get(g, False), requested=at)
        for g, t in targets.items()
        if t > previous.get(g, 0)
    }


def advance(phases: Mapping[str, GroupPhases], look: Look) -> dict[str, GroupPhases]:
    """The phases after ``look``: times already found never move; newly passed phases get theirs."""
    source: PhaseSource = "describe" if look.nodes is None else ("events" if look.events is not None else "nodes")
    out: dict[str, GroupPhases] = {}
    for name, gp in phases.items():
        if look.nodes is None:
            out[name] = _from_counts(gp, look.currents.get(name, 0), look.at, source)
        else:
            out[name] = _from_nodes(gp, [n for n in look.nodes if n.group == name], look, source)
    return out


def _from_counts(gp: GroupPhases, current: int, at: datetime, source: PhaseSource) -> GroupPhases:
    # DescribeCluster's CurrentCount counts nodes that are up; what is not up yet is all "in setup".
    done = current >= gp.target
    changes: dict[str, object] = {"source": source, "running": current, "in_setup": 0, "in_checks": 0, "seen_at": at}
    if done:
        passed: tuple[StartPhase, ...] = (
            ("launched", "lifecycle", "health_checks") if gp.checks else ("launched", "lifecycle")
        )
        for phase in passed:
            if gp.at(phase) is None:
                changes[phase] = at
    return gp.evolve(**changes)


def _from_nodes(gp: GroupPhases, nodes: Sequence[NodeSeen], look: Look, source: PhaseSource) -> GroupPhases:
    live = [n for n in nodes if n.status in _SETUP or n.status in (_CHECKING, _UP)]
    up = [n for n in live if n.status == _UP]
    checking = [n for n in live if n.status == _CHECKING]
    past_setup = up + checking if gp.checks else up
    marks: dict[tuple[str, str], datetime] = {}
    for e in look.events or ():
        key = (e.instance_id, e.marks)
        if key not in marks or e.at < marks[key]:
            marks[key] = e.at
    changes: dict[str, object] = {
        "source": source,
        "in_setup": len(live) - len(up) - len(checking),
        "in_checks": len(checking),
        "running": len(up),
        "seen_at": look.at,
    }

    def passed(phase: StartPhase, who: list[NodeSeen], times: list[datetime | None]) -> None:
        if gp.at(phase) is not None or len(who) < gp.target or gp.target == 0:
            return
        known = sorted(t for t in times if t is not None)
        # The target-th node's time when every one of them is known, else the moment of this look.
        when = known[gp.target - 1] if len(known) >= gp.target and len(known) == len(who) else look.at
        changes[phase] = max(gp.requested, min(when, look.at))

    passed("launched", live, [n.launched for n in live])
    if gp.checks:
        passed("lifecycle", past_setup, [marks.get((n.instance_id, "checks")) for n in past_setup])
        passed("health_checks", up, [marks.get((n.instance_id, "running")) for n in up])
    else:
        passed("lifecycle", up, [marks.get((n.instance_id, "running")) for n in up])
    return gp.evolve(**changes)


def joined_slurm(phases: Mapping[str, GroupPhases], at: datetime) -> dict[str, GroupPhases]:
    """Every group joined Slurm at ``at`` (the agent found the restored nodes idle)."""
    return {g: gp.evolve(slurm=gp.slurm or at) for g, gp in phases.items()}


def progress(phases: Mapping[str, GroupPhases], at: datetime, instance_types: Mapping[str, str | None]) -> str:
    """One line a person reads at a glance: "08:05: 12 of 16 p5 up; 4 not launched yet; health checks
    running" (one clause per group, groups joined by " | "). A node with no instance yet is not a
    capacity wait: only AWS's insufficient-capacity answer says that, and it is its own event."""
    parts = []
    for g, gp in phases.items():
        label = _family(instance_types.get(g)) or g
        clause = [f"{gp.running} of {gp.target} {label} up"]
        if gp.waiting:
            clause.append(f"{gp.waiting} not launched yet")
        if gp.in_setup:
            clause.append(f"{gp.in_setup} in lifecycle setup")
        if gp.in_checks:
            clause.append("health checks running")
        parts.append("; ".join(clause))
    return f"{at:%H:%M}: " + " | ".join(parts) if parts else f"{at:%H:%M}: nothing to follow"


def summary(phases: Mapping[str, GroupPhases]) -> str:
    """How long each phase took, per group: "p5: launched +9m, lifecycle +6m, health checks +48m"; where
    the times are only as good as the looks, it says so once at the end."""
    labels = {"launched": "launched", "lifecycle": "lifecycle", "health_checks": "health checks", "slurm": "Slurm"}
    out = []
    notes = []
    for g, gp in phases.items():
        steps = [f"{labels[p]} +{s / 60:.0f}m" for p, s in gp.durations_s().items()]
        if steps:
            out.append(f"{g}: {', '.join(steps)}")
        note = _SOURCE_NOTE[gp.source]
        if note and note not in notes:
            notes.append(note)
    if not out:
        return "no phase passed yet"
    return "; ".join(out) + (f" ({'; '.join(notes)})" if notes else "")


_SOURCE_NOTE = {
    "nodes": "times as seen by each look: no cluster events outside Continuous mode",
    "describe": "times as seen by each look: DescribeCluster counts only",
    "events": "",
}


def _family(instance_type: str | None) -> str:
    # ml.p5.48xlarge -> p5
    if not instance_type:
        return ""
    parts = instance_type.split(".")
    return parts[1] if len(parts) >= 2 else instance_type


def ready_durations(phases: Mapping[str, GroupPhases]) -> dict[str, dict[StartPhase, float]]:
    """Per group whose start finished every phase it has, the seconds each phase took."""
    return {g: gp.durations_s() for g, gp in phases.items() if gp.ready_at() is not None}
