"""Ready-by starts: how early to issue a start so the cluster is ready at the schedule's start time.

The lead time is learned from this cluster's own history of start-to-ready durations: a high
percentile plus a margin, bounded by a maximum, with a default until there is history.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from hyperpod_scheduler.config.model import ReadyBy

MIN_HISTORY = 3  # fewer starts than this: the default lead is used


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
