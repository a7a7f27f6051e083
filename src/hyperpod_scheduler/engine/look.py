"""What a starting cluster shows: its nodes (ListClusterNodes) and, in Continuous mode, its instance
events (ListClusterEvents). Read-only; anything that cannot be read is left out and said so.

The event wording is AWS's and not part of the API's shape: an event is used only to date a phase
that the node's own status already shows passed (``engine.phases``), so a changed wording costs
precision (the look's time is used), never a wrong phase.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.aws.pages import Pages
from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.engine.phases import Look, NodeEvent, NodeSeen

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient


def look(client: SageMakerClient, view: ClusterView, since: datetime, now: datetime) -> Look:
    notes: list[str] = []
    nodes: list[NodeSeen] | None
    listed = Pages(
        lambda **kw: client.list_cluster_nodes(**kw),
        "ListClusterNodes",
        "ClusterNodeSummaries",
        ClusterName=view.name,
        MaxResults=100,
    )
    try:
        nodes = [
            NodeSeen(
                group=str(n.get("InstanceGroupName", "")),
                instance_id=str(n.get("InstanceId", "")),
                status=str((n.get("InstanceStatus") or {}).get("Status", "")),
                launched=n.get("LaunchTime") if isinstance(n.get("LaunchTime"), datetime) else None,
            )
            for n in listed
        ]
    except (ClientError, BotoCoreError) as exc:
        nodes = None
        notes.append(f"ListClusterNodes unavailable ({_why(exc)}): phases from DescribeCluster counts")
    if listed.cut:  # beyond the bound a look gives up rather than stall a tick, and says so
        notes.append(listed.cut)
    events: list[NodeEvent] | None = None
    if view.continuous and nodes is not None:
        paged = Pages(
            lambda **kw: client.list_cluster_events(**kw),
            "ListClusterEvents",
            "Events",
            ClusterName=view.name,
            ResourceType="Instance",
            EventTimeAfter=since,
            MaxResults=100,
        )
        try:
            events = list(_events(paged))
        except (ClientError, BotoCoreError) as exc:
            notes.append(f"ListClusterEvents unavailable ({_why(exc)}): phase times as seen by each look")
        if paged.cut:
            notes.append(paged.cut)
    elif nodes is not None:
        notes.append("no cluster events outside Continuous mode: phase times as seen by each look")
    return Look(at=now, currents=view.currents(), nodes=nodes, events=events, note="; ".join(notes))


def _events(paged: Pages) -> Iterator[NodeEvent]:
    for e in paged:
        instance, at, text = e.get("InstanceId"), e.get("EventTime"), str(e.get("Description", "")).lower()
        if not isinstance(instance, str) or not isinstance(at, datetime):
            continue
        if "health check" in text:
            yield NodeEvent(instance, at, "checks")
        elif text.endswith("is running"):
            yield NodeEvent(instance, at, "running")


def _why(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "error"))
    return type(exc).__name__
