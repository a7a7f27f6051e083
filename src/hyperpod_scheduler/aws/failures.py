"""Why AWS says an update failed, read once here from what it answered: the one place the scheduler
looks at the words of a failure. Everything past this edge holds a ``FailureCause``.

What tells a failure for want of capacity (HyperPod guide and reported answers, hyperpod-facts.md,
"Provisioning modes and capacity"): an all-or-nothing update that rolls back with DescribeCluster's
``FailureMessage`` "We currently do not have sufficient capacity for the requested instance type(s).
Please try again."; a Continuous cluster's event or node status "... sufficient capacity to launch new
ml.p5.48xlarge instances ..."; EC2's error codes ``InsufficientInstanceCapacity`` /
``InsufficientCapacity`` where an answer carries a code. Anything else (lifecycle scripts, health
checks, a setting AWS refused) is ``OTHER``; no failure at all is None.
"""

from __future__ import annotations

import re
from enum import StrEnum


class FailureCause(StrEnum):
    """Why a stop or start did not settle, as AWS said it."""

    CAPACITY = "capacity"  # AWS had no instances of the type to give: says nothing of the AMI or the scripts
    OTHER = "other"  # anything else: lifecycle setup, health checks, a refused setting, unknown words


_CAPACITY_CODES = frozenset({"InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientCapacityError"})
# HyperPod's words ("do not have sufficient capacity"), and EC2's code when it is quoted in a message.
_CAPACITY_WORDS = re.compile(r"(not\s+have\s+sufficient\s+capacity|insufficient\s*(instance\s*)?capacity)", re.I)


def cause_of(message: str | None, code: str | None = None) -> FailureCause | None:
    """The cause of a failure AWS reported with ``message`` (a FailureMessage, an event's or a node
    status's text) and/or an error ``code``; None when neither says anything."""
    if code and code in _CAPACITY_CODES:
        return FailureCause.CAPACITY
    if message and _CAPACITY_WORDS.search(message):
        return FailureCause.CAPACITY
    return FailureCause.OTHER if (message or code) else None
