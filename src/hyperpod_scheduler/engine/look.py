"""What a starting cluster shows: its nodes (ListClusterNodes) and, in Continuous mode, its instance
events (ListClusterEvents). Read-only; anything that cannot be read is left out and said so.

The event wording is AWS's and not part of the API's shape: an event is used only to date a phase
that the node's own status already shows passed (``engine.phases``), so a changed wording costs
precision (the look's time is used), never a wrong phase.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.engine.phases import Look, NodeEvent, NodeSeen

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

MAX_PAGES = 50  # 5,000 nodes or events: beyond that a look gives up rather than stall a tick


def look(client: SageMakerClient, view: ClusterView, since: datetime, now: datetime) -> Look:
    notes: list[str] = []
    nodes: list[NodeSeen] | None
    try:
        nodes = [
            NodeSeen(
                group=str(n.get("InstanceGroupName", "")),
                instance_id=str(n.get("InstanceId", "")),
                status=str((n.get("InstanceStatus") or {}).get("Status", "")),
                launched=n.get("LaunchTime") if isinstance(n.get("LaunchTime"), datetime) else None,
            )
            for n in _pages(lambda **kw: client.list_cluster_nodes(**kw), "ClusterNodeSummaries", ClusterName=view.name)
        ]
    except (ClientError, BotoCoreError) as exc:
        nodes = None
        notes.append(f"ListClusterNodes unavailable ({_why(exc)}): phases from DescribeCluster counts")
    events: list[NodeEvent] | None = None
    if view.continuous and nodes is not None:
        try:
            events = list(_events(client, view.name, since))
        except (ClientError, BotoCoreError) as exc:
            notes.append(f"ListClusterEvents unavailable ({_why(exc)}): phase times as seen by each look")
    elif nodes is not None:
        notes.append("no cluster events outside Continuous mode: phase times as seen by each look")
    return Look(at=now, currents=view.currents(), nodes=nodes, events=events, note="; ".join(notes))


def _events(client: SageMakerClient, name: str, since: datetime) -> Iterator[NodeEvent]:
    for e in _pages(
        lambda **kw: client.list_cluster_events(**kw),
        "Events",
        ClusterName=name,
        ResourceType="Instance",
        EventTimeAfter=since,
    ):
        instance, at, text = e.get("InstanceId"), e.get("EventTime"), str(e.get("Description", "")).lower()
        if not isinstance(instance, str) or not isinstance(at, datetime):
            continue
        if "health check" in text:
            yield NodeEvent(instance, at, "checks")
        elif text.endswith("is running"):
            yield NodeEvent(instance, at, "running")


def _pages(call: Any, key: str, **params: Any) -> Iterator[Mapping[str, Any]]:
    token: str | None = None
    for _ in range(MAX_PAGES):
        answer = call(**params, **({"NextToken": token} if token else {}))
        yield from answer.get(key, [])
        token = answer.get("NextToken")
        if not token:
            return


def _why(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "error"))
    return type(exc).__name__
