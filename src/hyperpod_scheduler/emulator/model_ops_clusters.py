"""The cluster operations: CreateCluster, UpdateCluster, DeleteCluster, DescribeCluster, ListClusters.

The protocol layer has already checked each request against the botocore model; these add the
semantic rules (shared with ``cluster validate``), existence and state checks, and quotas.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from hyperpod_scheduler.cluster.rules import check_semantics, check_update_request, node_type
from hyperpod_scheduler.emulator import model_continuous as continuous_mode
from hyperpod_scheduler.emulator import model_control as control
from hyperpod_scheduler.emulator import model_views as views
from hyperpod_scheduler.emulator.errors import conflict, in_use, validation
from hyperpod_scheduler.emulator.model_lookup import check_quota, find_cluster, raise_problems
from hyperpod_scheduler.emulator.model_state import Cluster, Group
from hyperpod_scheduler.emulator.model_world import World

CLUSTER_KEYS = (
    "VpcConfig",
    "Orchestrator",
    "NodeRecovery",
    "NodeProvisioningMode",
    "ClusterRole",
    "TieredStorageConfig",
    "AutoScaling",
)


def _min_count(g: dict[str, Any], continuous: bool) -> int | None:
    if "MinInstanceCount" in g:
        return int(g["MinInstanceCount"])
    if continuous and node_type(g) in ("Controller", "Login"):
        return min(1, int(g["InstanceCount"]))  # the documented Continuous default for head nodes
    return 0 if continuous else None


def _spec(g: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in g.items() if k not in ("InstanceCount", "MinInstanceCount")}


def _check_types(groups: list[dict[str, Any]]) -> None:
    for i, g in enumerate(groups):
        if "InstanceType" not in g and not (g.get("InstanceRequirements") or {}).get("InstanceTypes"):
            raise validation(f"InstanceGroups[{i}].InstanceType: required (or InstanceRequirements)")


def create_cluster(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    name = p["ClusterName"]
    if (account, region, name) in w.by_name:
        raise in_use(f"Cluster {name} already exists")
    groups = list(p.get("InstanceGroups") or [])
    if not groups:
        raise validation("InstanceGroups: at least one instance group is required")
    if p.get("RestrictedInstanceGroups"):
        raise validation("RestrictedInstanceGroups: not supported by the emulator")
    raise_problems(check_semantics(p))
    _check_types(groups)
    continuous = p.get("NodeProvisioningMode") == "Continuous"
    delta: dict[str, int] = {}
    records = []
    for g in groups:
        group = Group(
            g["InstanceGroupName"], _spec(g), int(g["InstanceCount"]), _min_count(g, continuous), "Creating", 1
        )
        delta[group.instance_type] = delta.get(group.instance_type, 0) + group.target
        records.append(group)
    check_quota(w, account, region, delta, None)
    cluster_id = w.rng.cluster_id()
    c = Cluster(
        arn=f"arn:aws:sagemaker:{region}:{account}:cluster/{cluster_id}",
        name=name,
        cluster_id=cluster_id,
        account=account,
        region=region,
        created=t,
        status="Creating",
        config={k: copy.deepcopy(p[k]) for k in CLUSTER_KEYS if k in p},
        groups={g.name: g for g in records},
        tags={tag["Key"]: tag["Value"] for tag in p.get("Tags") or []},
    )
    w.add_cluster(c)
    control.begin_operation(w, c, t, "create", {})
    return {"ClusterArn": c.arn}


def request_form(c: Cluster) -> dict[str, Any]:
    """The cluster's current configuration as a CreateCluster request (for the shared rules)."""
    groups = []
    for g in c.groups.values():
        if g.status == "Deleting":
            continue
        spec = {**copy.deepcopy(g.spec), "InstanceGroupName": g.name, "InstanceCount": g.target}
        if g.min_count is not None:
            spec["MinInstanceCount"] = g.min_count
        groups.append(spec)
    return {"ClusterName": c.name, **copy.deepcopy(c.config), "InstanceGroups": groups}


def update_cluster(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = find_cluster(w, p["ClusterName"], account, region)
    if p.get("RestrictedInstanceGroups"):
        raise validation("RestrictedInstanceGroups: not supported by the emulator")
    live = [g for g in c.groups.values() if g.status != "Deleting"]
    existing = [views.describe_group(c, g) for g in live]
    raise_problems(check_update_request(p, existing, request_form(c)))
    sent = list(p.get("InstanceGroups") or [])
    _check_types([g for g in sent if g["InstanceGroupName"] not in c.groups])
    to_delete = list(p.get("InstanceGroupsToDelete") or [])
    for name in to_delete:
        if name not in c.groups or c.groups[name].status == "Deleting":
            raise validation(f"InstanceGroupsToDelete: instance group {name} not found in cluster {c.name}")
        if any(g["InstanceGroupName"] == name for g in sent):
            raise validation(f"InstanceGroupsToDelete: instance group {name} is also in InstanceGroups")
    continuous = c.continuous or p.get("NodeProvisioningMode") == "Continuous"
    touched = [g["InstanceGroupName"] for g in sent] + to_delete
    if c.status != "InService":
        raise conflict(f"Cluster {c.name} is in {c.status} state; it can be updated only when InService")
    if continuous:
        busy = [n for n in touched if n in c.groups and c.groups[n].status in ("Creating", "Updating", "Deleting")]
        if busy:
            raise conflict(
                f"Instance group {busy[0]} of cluster {c.name} is {c.groups[busy[0]].status}; "
                "wait until it is InService"
            )
    delta: dict[str, int] = {}
    for g in sent:
        old = c.groups.get(g["InstanceGroupName"])
        itype = old.instance_type if old else Group(g["InstanceGroupName"], _spec(g), 0, None, "", 0).instance_type
        delta[itype] = delta.get(itype, 0) + int(g["InstanceCount"]) - (old.target if old else 0)
    check_quota(w, account, region, delta, None)

    snapshot = {name: g.to_dict() for name, g in c.groups.items()}
    for key in CLUSTER_KEYS:
        if key in p:
            c.config[key] = copy.deepcopy(p[key])
    for g in sent:
        name = g["InstanceGroupName"]
        old = c.groups.get(name)
        if old is None:
            c.groups[name] = Group(
                name, _spec(g), int(g["InstanceCount"]), _min_count(g, continuous), "Creating", c.op_counter + 1
            )
            continue
        # Assumption (unconfirmed upstream): a field the update omits keeps its value, so a group
        # created with a LifeCycleConfig keeps it; groups the update does not name stay as they are.
        if continuous:
            continuous_mode.remember_stable(c, old)
        spec = {**old.spec, **_spec(g)}
        changed = spec != old.spec or int(g["InstanceCount"]) != old.target
        old.spec = spec
        old.target = int(g["InstanceCount"])
        if "MinInstanceCount" in g:
            old.min_count = int(g["MinInstanceCount"])
        if changed and not continuous:
            old.status = "Updating"
    for name in to_delete:
        c.groups[name].status = "Deleting"
    if continuous:
        control.continuous_update(w, c, t, touched)
    else:
        control.begin_operation(w, c, t, "update", snapshot)
    w.touch(c)
    return {"ClusterArn": c.arn}


def delete_cluster(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = find_cluster(w, p["ClusterName"], account, region)
    if c.status == "Deleting":
        raise conflict(f"Cluster {c.name} is already being deleted")
    control.begin_delete(w, c, t)
    return {"ClusterArn": c.arn}


def describe_cluster(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    return views.describe_cluster(find_cluster(w, p["ClusterName"], account, region))


def list_clusters(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    after, before = p.get("CreationTimeAfter"), p.get("CreationTimeBefore")
    contains, plan = p.get("NameContains"), p.get("TrainingPlanArn")
    found = [
        c
        for c in w.clusters.values()
        if c.account == account
        and c.region == region
        and (not contains or contains in c.name)
        and (after is None or c.created > after)
        and (before is None or c.created < before)
        and (not plan or any(g.spec.get("TrainingPlanArn") == plan for g in c.groups.values()))
    ]
    if p.get("SortBy") == "NAME":
        found.sort(key=lambda c: c.name)
    else:
        found.sort(key=lambda c: (c.created, c.name))
    if p.get("SortOrder") == "Descending":
        found.reverse()
    chunk, token = views.page(found, p)
    out: dict[str, Any] = {"ClusterSummaries": [views.cluster_summary(c) for c in chunk]}
    if token:
        out["NextToken"] = token
    return out
