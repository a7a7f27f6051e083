"""Observability as data: one JSON log line per engine event, and CloudWatch EMF metric lines.

Both are pure functions from events/results to dicts; the handlers print them (Lambda sends stdout
to CloudWatch Logs, which extracts EMF metrics without any API call from the function).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hyperpod_scheduler.engine.events import Event
from hyperpod_scheduler.engine.runner import Result
from hyperpod_scheduler.store.outcomes import read_outcomes
from hyperpod_scheduler.store.records import ClusterRecord

NAMESPACE = "HyperPodScheduler"
FAILURE_KINDS = frozenset({"failed", "error"})
# Group outcomes that mean a start came back short of the recorded size.
SHORT_OUTCOMES = ("partial", "failed")


@dataclass(frozen=True)
class Place:
    account: str
    region: str


def log_line(place: Place, event: Event) -> dict[str, Any]:
    """The structured log record of one engine event (``outcome`` is the event kind)."""
    line: dict[str, Any] = {
        "level": "ERROR" if event.kind in FAILURE_KINDS else "INFO",
        "at": event.at.isoformat(),
        "cluster": event.cluster,
        "account": place.account,
        "region": place.region,
        "outcome": event.kind,
        "message": event.message,
    }
    if event.detail:
        line["detail"] = event.detail
    return line


@dataclass(frozen=True)
class TickCounts:
    actions: int
    failures: int
    shortfalls: int
    saved_instances: int
    deferred: int = 0
    throttles: int = 0


def count(
    events: Iterable[Event],
    results: Iterable[Result],
    records: Iterable[ClusterRecord | None],
    *,
    throttles: int = 0,
) -> TickCounts:
    """Actions sent, failures, clusters that came back short, instances kept off by the scheduler,
    clusters left for the next run, and throttled SageMaker answers."""
    events = list(events)
    results = list(results)
    actions = sum(1 for e in events if e.kind == "sent")
    failures = sum(1 for r in results if r.kind in FAILURE_KINDS)
    shortfalls = sum(1 for e in events if e.kind in ("settled", "failed") and _short(e.detail.get("outcomes")))
    saved = sum(_stopped_instances(r) for r in records)
    deferred = sum(1 for r in results if r.kind == "deferred")
    return TickCounts(actions, failures, shortfalls, saved, deferred, throttles)


def _short(outcomes: Any) -> bool:
    if not isinstance(outcomes, Mapping):
        return False
    return any(o.outcome in SHORT_OUTCOMES for o in read_outcomes({"outcomes": outcomes}).values())


def _stopped_instances(record: ClusterRecord | None) -> int:
    """The recorded size of a cluster the scheduler holds stopped: the instances not being paid for."""
    if record is None or record.snapshot is None or record.applied_state != "stopped":
        return 0
    return sum(size.count for size in record.snapshot.sizes.values())


def dimension_sets(per_account: bool) -> list[list[str]]:
    """Fleet-wide (what the alarms watch) and per region; per account only when asked for.

    Every dimension set is a custom metric of its own, billed per metric and month: per account that is
    one set per account and region, which at a few hundred targets costs more than the rest of the hub.
    The log line names the account either way (CloudWatch Logs Insights can group by it for free)."""
    sets: list[list[str]] = [[], ["Region"]]
    if per_account:
        sets.append(["Account", "Region"])
    return sets


def emf(place: Place, counts: TickCounts, at: datetime, *, per_account: bool = False) -> dict[str, Any]:
    """One EMF document: CloudWatch turns it into metrics in ``NAMESPACE`` (see ``dimension_sets``)."""
    metrics = {
        "Actions": counts.actions,
        "Failures": counts.failures,
        "Shortfalls": counts.shortfalls,
        "SavedInstances": counts.saved_instances,
        "Deferred": counts.deferred,
        "Throttles": counts.throttles,
    }
    return {
        "_aws": {
            "Timestamp": int(at.timestamp() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": NAMESPACE,
                    "Dimensions": dimension_sets(per_account),
                    "Metrics": [{"Name": name, "Unit": "Count"} for name in metrics],
                }
            ],
        },
        "Account": place.account,
        "Region": place.region,
        **metrics,
    }


def orchestrator_emf(queued: int, already: int, unqueued: int, at: datetime, paused: bool = False) -> dict[str, Any]:
    """The orchestrator's tick: parts queued, parts skipped because still queued or in flight, and
    parts that could not be queued (a message too large, a failed send): the last one is alarmed.
    ``Paused`` is 1 while the pause switch is on (nothing is queued)."""
    metrics = {"PartsQueued": queued, "PartsInFlight": already, "PartsNotQueued": unqueued, "Paused": int(paused)}
    return {
        "_aws": {
            "Timestamp": int(at.timestamp() * 1000),
            "CloudWatchMetrics": [
                {"Namespace": NAMESPACE, "Dimensions": [[]], "Metrics": [{"Name": n, "Unit": "Count"} for n in metrics]}
            ],
        },
        **metrics,
    }


def dumps(line: Mapping[str, Any]) -> str:
    return json.dumps(line, default=str, separators=(",", ":"), sort_keys=False)
