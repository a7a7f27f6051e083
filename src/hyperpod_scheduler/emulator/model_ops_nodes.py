"""The node operations: ListClusterNodes, DescribeClusterNode, BatchAddClusterNodes, BatchDeleteClusterNodes."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

from hyperpod_scheduler.emulator import model_continuous as continuous_mode
from hyperpod_scheduler.emulator import model_control as control
from hyperpod_scheduler.emulator import model_nodes
from hyperpod_scheduler.emulator import model_operations as operations
from hyperpod_scheduler.emulator import model_views as views
from hyperpod_scheduler.emulator.errors import conflict, not_found, validation
from hyperpod_scheduler.emulator.model_lookup import check_quota, find_cluster
from hyperpod_scheduler.emulator.model_world import World

TOKEN_LIFETIME = timedelta(hours=8)
MAX_BATCH_ADD_NODES = 50
MAX_BATCH_ADD_GROUPS = 5
MAX_BATCH_DELETE_IDS = 99  # the guide: "If you need to delete more than 99 instances, contact Support"
MAX_BATCH_DELETE_COMBINED = 50  # model docs: NodeLogicalIds, InstanceIds "or both, with a combined maximum of 50"


def list_cluster_nodes(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = find_cluster(w, p["ClusterName"], account, region)
    after, before = p.get("CreationTimeAfter"), p.get("CreationTimeBefore")
    contains = p.get("InstanceGroupNameContains")
    found = [
        n
        for n in c.nodes.values()
        if (not contains or contains in n.group)
        and (after is None or n.launch_time > after)
        and (before is None or n.launch_time < before)
    ]
    if p.get("SortBy") == "NAME":
        found.sort(key=lambda n: (n.group, n.instance_id))
    else:
        found.sort(key=lambda n: (n.launch_time, n.instance_id))
    if p.get("SortOrder") == "Descending":
        found.reverse()
    chunk, token = views.page(found, p)
    with_logical = bool(p.get("IncludeNodeLogicalIds"))
    out: dict[str, Any] = {"ClusterNodeSummaries": [views.node_summary(w, c, n, t, with_logical) for n in chunk]}
    if token:
        out["NextToken"] = token
    return out


def describe_cluster_node(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = find_cluster(w, p["ClusterName"], account, region)
    node_id, logical = p.get("NodeId"), p.get("NodeLogicalId")
    if bool(node_id) == bool(logical):
        raise validation("Specify exactly one of NodeId and NodeLogicalId")
    for n in c.nodes.values():
        if (node_id and n.instance_id == node_id) or (logical and n.logical_id == logical):
            return {"NodeDetails": views.node_details(w, c, n, t)}
    if logical:
        for g in c.groups.values():
            if logical in g.logical_queue:
                return {"NodeDetails": views.pending_logical_node(g, logical)}
    raise not_found(f"Node {node_id or logical} not found in cluster {c.name}")


def batch_add_cluster_nodes(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = find_cluster(w, p["ClusterName"], account, region)
    if not c.continuous:
        raise validation("BatchAddClusterNodes is only supported for clusters with NodeProvisioningMode Continuous")
    specs = list(p["NodesToAdd"])
    if not 1 <= len(specs) <= MAX_BATCH_ADD_GROUPS:
        raise validation(f"NodesToAdd: 1 to {MAX_BATCH_ADD_GROUPS} instance groups per request, got {len(specs)}")
    total = sum(int(s["IncrementTargetCountBy"]) for s in specs)
    for i, s in enumerate(specs):
        if not 1 <= int(s["IncrementTargetCountBy"]) <= MAX_BATCH_ADD_NODES:
            raise validation(f"NodesToAdd[{i}].IncrementTargetCountBy: must be 1 to {MAX_BATCH_ADD_NODES}")
    if total > MAX_BATCH_ADD_NODES:
        raise validation(f"NodesToAdd: at most {MAX_BATCH_ADD_NODES} nodes per request, got {total}")
    token = p.get("ClientToken")
    c.tokens = {k: v for k, v in c.tokens.items() if t - v[0] < TOKEN_LIFETIME}
    if token and token in c.tokens:
        stored = c.tokens[token][1]
        if stored.get("request") != specs:
            raise validation(f"ClientToken {token} was already used with different parameters")
        return copy.deepcopy(stored["response"])
    if c.status != "InService":
        raise conflict(f"Cluster {c.name} is in {c.status} state; nodes can be added only when InService")
    successful: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    delta: dict[str, int] = {}
    for s in specs:
        g = c.groups.get(s["InstanceGroupName"])
        if g is not None:
            delta[g.instance_type] = delta.get(g.instance_type, 0) + int(s["IncrementTargetCountBy"])
    check_quota(w, account, region, delta, None)
    touched = []
    before = operations.snapshot(c)
    for s in specs:
        name, n = s["InstanceGroupName"], int(s["IncrementTargetCountBy"])
        g = c.groups.get(name)
        if g is None:
            failed.append(
                {
                    "InstanceGroupName": name,
                    "ErrorCode": "InstanceGroupNotFound",
                    "FailedCount": n,
                    "Message": f"Instance group {name} not found",
                }
            )
            continue
        if g.status in ("Creating", "Updating", "Deleting", "Failed"):
            failed.append(
                {
                    "InstanceGroupName": name,
                    "ErrorCode": "InvalidInstanceGroupStatus",
                    "FailedCount": n,
                    "Message": f"Instance group {name} is {g.status}",
                }
            )
            continue
        continuous_mode.remember_stable(c, g)
        ids = [w.rng.event_id() for _ in range(n)]
        g.logical_queue.extend(ids)
        g.target += n
        touched.append(name)
        successful.extend({"NodeLogicalId": i, "InstanceGroupName": name, "Status": "Pending"} for i in ids)
    if touched:
        operations.begin_scaling(w, c, t, before)
        control.continuous_update(w, c, t, touched)
    response = {"Successful": successful, "Failed": failed}
    if token:
        c.tokens[token] = (t, {"request": copy.deepcopy(specs), "response": copy.deepcopy(response)})
    w.touch(c)
    return response


def batch_delete_cluster_nodes(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = find_cluster(w, p["ClusterName"], account, region)
    ids, logical = list(p.get("NodeIds") or []), list(p.get("NodeLogicalIds") or [])
    if not ids and not logical:
        raise validation("Specify NodeIds or NodeLogicalIds")
    if len(ids) > MAX_BATCH_DELETE_IDS:
        raise validation(f"NodeIds: at most {MAX_BATCH_DELETE_IDS} node ids per request, got {len(ids)}")
    if logical and len(ids) + len(logical) > MAX_BATCH_DELETE_COMBINED:
        raise validation(
            f"NodeIds and NodeLogicalIds: at most {MAX_BATCH_DELETE_COMBINED} identifiers combined, "
            f"got {len(ids)} + {len(logical)}"
        )
    if c.status not in ("InService",):
        raise conflict(f"Cluster {c.name} is in {c.status} state; nodes can be deleted only when InService")
    # Every list in the answer has a minimum of one item in the model: an empty one is left out.
    out: dict[str, Any] = {}
    before = operations.snapshot(c)
    by_logical = {n.logical_id: n for n in c.nodes.values() if n.logical_id}
    for key, node_id in [("NodeId", i) for i in ids] + [("NodeLogicalId", i) for i in logical]:
        node = c.nodes.get(node_id) if key == "NodeId" else by_logical.get(node_id)
        fail_list = "Failed" if key == "NodeId" else "FailedNodeLogicalIds"
        ok_list = "Successful" if key == "NodeId" else "SuccessfulNodeLogicalIds"
        g = c.groups.get(node.group) if node else None
        if node is None or g is None:
            out.setdefault(fail_list, []).append(
                {"Code": "NodeIdNotFound", key: node_id, "Message": f"Node {node_id} not found"}
            )
        elif g.node_type == "Controller":
            out.setdefault(fail_list, []).append(
                {"Code": "InvalidNodeStatus", key: node_id, "Message": "Slurm controller nodes cannot be deleted"}
            )
        elif not node.active or g.status in ("Creating", "Updating", "Deleting"):
            out.setdefault(fail_list, []).append(
                {"Code": "InvalidNodeStatus", key: node_id, "Message": f"Node {node_id} is {node.status}"}
            )
        else:
            model_nodes.shut_down(w, c, node, t, "BatchDeleteClusterNodes")
            g.target = max(0, g.target - 1)
            if g.min_count is not None and g.min_count > g.target:
                g.min_count = g.target
            out.setdefault(ok_list, []).append(node_id)
    operations.begin_scaling(w, c, t, before)
    w.touch(c)
    return out
