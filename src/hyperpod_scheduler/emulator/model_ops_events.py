"""Cluster events and operations (ListClusterEvents, DescribeClusterEvent, ListClusterOperations,
DescribeClusterOperation) and tags on cluster ARNs."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from hyperpod_scheduler.emulator import model_views as views
from hyperpod_scheduler.emulator.errors import limit_exceeded, not_found, validation
from hyperpod_scheduler.emulator.model_lookup import find_cluster
from hyperpod_scheduler.emulator.model_state import Cluster
from hyperpod_scheduler.emulator.model_world import World

MAX_TAGS = 50


def _cluster_by_resource_arn(w: World, arn: str, account: str, region: str) -> Cluster:
    c = w.clusters.get(arn)
    if c is None or c.account != account or c.region != region:
        raise not_found(f"Resource {arn} not found")
    return c


def list_tags(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = _cluster_by_resource_arn(w, p["ResourceArn"], account, region)
    tags = [{"Key": k, "Value": v} for k, v in c.tags.items()]
    chunk, token = views.page(tags, p, default_max=50)
    out: dict[str, Any] = {"Tags": chunk}
    if token:
        out["NextToken"] = token
    return out


def add_tags(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = _cluster_by_resource_arn(w, p["ResourceArn"], account, region)
    merged = {**c.tags, **{tag["Key"]: tag["Value"] for tag in p["Tags"]}}
    if len(merged) > MAX_TAGS:
        raise limit_exceeded(f"A resource can have at most {MAX_TAGS} tags, this request would give it {len(merged)}")
    c.tags = merged
    w.touch(c)
    return {"Tags": copy.deepcopy(p["Tags"])}


def delete_tags(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = _cluster_by_resource_arn(w, p["ResourceArn"], account, region)
    for key in p["TagKeys"]:
        c.tags.pop(key, None)
    w.touch(c)
    return {}


def _continuous_only(c: Cluster, operation: str) -> None:
    # Model docs: "This functionality is only supported when the NodeProvisioningMode is set to Continuous."
    if not c.continuous:
        raise validation(
            f"{operation} is only supported for clusters with NodeProvisioningMode Continuous; "
            f"cluster {c.name} does not use it"
        )


def list_cluster_events(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = find_cluster(w, p["ClusterName"], account, region)
    _continuous_only(c, "ListClusterEvents")
    group, node_id, rtype = p.get("InstanceGroupName"), p.get("NodeId"), p.get("ResourceType")
    after, before, op = p.get("EventTimeAfter"), p.get("EventTimeBefore"), p.get("OperationId")
    found = [
        e
        for e in c.events
        if (not group or e.group == group)
        and (not node_id or e.instance_id == node_id)
        and (not rtype or e.resource_type == rtype)
        and (not op or e.operation_id == op)
        and (after is None or e.time > after)
        and (before is None or e.time < before)
    ]
    if p.get("SortOrder", "Descending") == "Descending":
        found.reverse()
    chunk, token = views.page(found, p)
    out: dict[str, Any] = {"Events": [views.event_summary(c, e) for e in chunk]}
    if token:
        out["NextToken"] = token
    return out


def describe_cluster_event(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = find_cluster(w, p["ClusterName"], account, region)
    _continuous_only(c, "DescribeClusterEvent")
    for e in c.events:
        if e.event_id == p["EventId"]:
            return {"EventDetails": views.event_detail(c, e)}
    raise not_found(f"Event {p['EventId']} not found in cluster {c.name}")


def list_cluster_operations(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = find_cluster(w, p["ClusterName"], account, region)
    status, kind = p.get("Status"), p.get("Type")
    after, before = p.get("CreationTimeAfter"), p.get("CreationTimeBefore")
    found = [
        op
        for op in c.operations
        if (not status or op.status == status)
        and (not kind or op.kind == kind)
        and (after is None or op.created > after)
        and (before is None or op.created < before)
    ]
    if p.get("SortOrder", "Descending") == "Descending":
        found.reverse()
    chunk, token = views.page(found, p)
    out: dict[str, Any] = {"ClusterOperationSummaries": [views.operation_summary(c, op) for op in chunk]}
    if token:
        out["NextToken"] = token
    return out


def describe_cluster_operation(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = find_cluster(w, p["ClusterName"], account, region)
    for op in c.operations:
        if op.operation_id == p["OperationId"]:
            return views.operation_detail(c, op)
    raise not_found(f"Operation {p['OperationId']} not found in cluster {c.name}")
