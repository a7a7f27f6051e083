"""Ready-by starts: how early to issue a start so the cluster is ready at the schedule's start time.

The lead time is learned per instance group from its own starts (request to ready, phases seen: deep
health checks included): a high percentile plus a margin, bounded by a maximum. The cluster's lead is
its slowest group's. Until a group has history, the cluster-wide durations stand in (records from
before per-group phases), then a default: ``default_minutes``, plus an estimate of the deep health
checks by instance family when the group runs them (AWS publishes no duration: these are ours).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hyperpod_scheduler.config.model import ReadyBy

MIN_HISTORY = 3  # fewer starts than this: the default lead is used
# Minutes of on-start deep health checks (DCGM level 4, NCCL and EFA tests; Neuron checks on
# Trainium) added to the default lead of a group that runs them, first match wins. No duration is
# published by AWS: these are estimates near the top of what a full check of one node of the family
# takes, so a first morning is early rather than late, and are replaced by the group's own history
# after three starts.
HEALTH_CHECK_MINUTES: tuple[tuple[str, float], ...] = (
    ("ml.p6", 75),
    ("ml.p5", 60),
    ("ml.p4", 55),
    ("ml.trn", 45),
    ("ml.g", 25),
)
HEALTH_CHECK_OTHER_MINUTES = 15.0


@dataclass(frozen=True)
class Lead:
    lead: timedelta
    why: str


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (no interpolation: a lead time should be a duration that happened)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def lead_time(durations_s: Sequence[float], settings: ReadyBy) -> Lead:
    cap = timedelta(minutes=settings.max_minutes)
    if len(durations_s) < MIN_HISTORY:
        lead = min(timedelta(minutes=settings.default_minutes), cap)
        return Lead(lead, f"default {lead.total_seconds() / 60:.0f} min (fewer than {MIN_HISTORY} starts recorded)")
    p = percentile(durations_s, settings.percentile)
    lead = timedelta(seconds=p) + timedelta(minutes=settings.margin_minutes)
    why = (
        f"p{settings.percentile:g} of {len(durations_s)} starts {p / 60:.0f} min "
        f"+ {settings.margin_minutes:g} min margin"
    )
    if lead > cap:
        return Lead(cap, f"{why}, capped at {settings.max_minutes:g} min")
    return Lead(lead, why)


def health_check_minutes(instance_type: str | None) -> float:
    for prefix, minutes in HEALTH_CHECK_MINUTES:
        if (instance_type or "").startswith(prefix):
            return minutes
    return HEALTH_CHECK_OTHER_MINUTES


@dataclass(frozen=True)
class GroupHistory:
    """What a group's ready-by lead is learned from: its recorded type, whether it runs deep health
    checks on start, and its recent starts' seconds per phase."""

    group: str
    instance_type: str | None
    health_checks: bool
    starts: Sequence[Mapping[Any, float]]


def group_lead(g: GroupHistory, cluster_durations_s: Sequence[float], settings: ReadyBy) -> Lead:
    if len(g.starts) >= MIN_HISTORY:
        # Request to ready, health checks and capacity waits included: the sum of its phases.
        return lead_time([sum(start.values()) for start in g.starts], settings)
    if len(cluster_durations_s) >= MIN_HISTORY:
        learned = lead_time(cluster_durations_s, settings)
        return Lead(learned.lead, f"{learned.why} (whole cluster)")
    cap = timedelta(minutes=settings.max_minutes)
    if not g.health_checks:
        return lead_time([], settings)
    checks = health_check_minutes(g.instance_type)
    lead = timedelta(minutes=settings.default_minutes + checks)
    why = (
        f"default {settings.default_minutes:g} min + {checks:g} min of deep health checks for "
        f"{g.instance_type or 'this type'} (fewer than {MIN_HISTORY} starts recorded)"
    )
    if lead > cap:
        return Lead(cap, f"{why}, capped at {settings.max_minutes:g} min")
    return Lead(lead, why)


def cluster_lead(groups: Sequence[GroupHistory], cluster_durations_s: Sequence[float], settings: ReadyBy) -> Lead:
    """The slowest group's lead (a cluster is ready when its last group is), naming that group."""
    if not groups:
        return lead_time(cluster_durations_s, settings)
    leads = [(group_lead(g, cluster_durations_s, settings), g.group) for g in groups]
    lead, name = max(leads, key=lambda pair: pair[0].lead)
    if len({(one.lead, one.why) for one, _ in leads}) == 1:
        return lead  # every group the same (a default, or the cluster's own history): no one to name
    return Lead(lead.lead, f"{name}: {lead.why}")


def histories(
    sizes: Mapping[str, tuple[str | None, bool, int]], by_group: Mapping[str, Sequence[Mapping[Any, float]]]
) -> list[GroupHistory]:
    """The groups a start would restore (recorded count above 0): (type, health checks, count) each."""
    return [
        GroupHistory(name, itype, checks, list(by_group.get(name, ())))
        for name, (itype, checks, count) in sizes.items()
        if count > 0
    ]
