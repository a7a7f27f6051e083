"""The cluster operations: CreateCluster, UpdateCluster, DeleteCluster, DescribeCluster, ListClusters.

The protocol layer has already checked each request against the botocore model; these add the
documented semantic rules (``model_rules``), training plans and AMI releases, existence and state
checks, and quotas. Everything is checked before anything changes.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from hyperpod_scheduler.emulator import model_continuous as continuous_mode
from hyperpod_scheduler.emulator import model_control as control
from hyperpod_scheduler.emulator import model_operations as operations
from hyperpod_scheduler.emulator import model_rules as rules
from hyperpod_scheduler.emulator import model_views as views
from hyperpod_scheduler.emulator.errors import conflict, in_use, validation
from hyperpod_scheduler.emulator.model_lookup import check_quota, find_cluster, raise_findings
from hyperpod_scheduler.emulator.model_plans import EXPIRED
from hyperpod_scheduler.emulator.model_state import Cluster, Group
from hyperpod_scheduler.emulator.model_world import RESET, World

CLUSTER_KEYS = (
    "VpcConfig",
    "Orchestrator",
    "NodeRecovery",
    "NodeProvisioningMode",
    "ClusterRole",
    "TieredStorageConfig",
    "AutoScaling",
)
_COUNTS = ("InstanceCount", "MinInstanceCount")


def _min_count(g: dict[str, Any], continuous: bool) -> int | None:
    if "MinInstanceCount" in g:
        return int(g["MinInstanceCount"])
    if continuous and rules.slurm_node_type(g) in ("Controller", "Login"):
        return min(1, int(g["InstanceCount"]))  # the documented Continuous default for head nodes
    return 0 if continuous else None


def _spec(g: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in g.items() if k not in _COUNTS}


def _refuse_restricted(p: dict[str, Any]) -> None:
    for key in ("RestrictedInstanceGroups", "RestrictedInstanceGroupsConfig"):
        if p.get(key):
            raise validation(f"{key}: restricted instance groups are not modelled by the emulator")


# --- training plans and AMI releases ------------------------------------------------------------------


def _plan_findings(
    w: World, t: datetime, i: int, spec: dict[str, Any], old: Group | None, account: str, region: str
) -> list[rules.Finding]:
    arn = spec.get("TrainingPlanArn")
    if not isinstance(arn, str):
        return []
    where = f"InstanceGroups[{i}].TrainingPlanArn"
    group = f"(group {spec.get('InstanceGroupName')})"
    plan = w.plans().get(arn)
    if plan is None or plan.account != account or plan.region != region:
        return [(where, f"training plan {arn} not found in {account}/{region} {group}")]
    itype = Group("", spec, 0, None, "", 0).instance_type
    if itype not in plan.instance_types():
        return [(where, f"plan {plan.name} reserves {', '.join(sorted(plan.instance_types()))}, not {itype} {group}")]
    already = old is not None and old.spec.get("TrainingPlanArn") == arn
    if not already and plan.status(t, w.origin) == EXPIRED:
        return [(where, f"training plan {plan.name} has expired {group}")]
    return []


def _image_for(
    w: World, c: Cluster | None, i: int, sent: dict[str, Any], old: Group | None, t: datetime
) -> tuple[str | None, str]:
    """The (release version, AMI id) a group's new nodes will run after this request.

    Model docs: ImageReleaseVersion "If omitted, the latest available version is used"; ImageId
    ``default`` is "the default latest system image", and in Continuous mode "new instance groups
    inherit the AMI from the earliest existing instance group". An existing group that omits both
    keeps its release (``keep``) or moves to the latest one (``reset``, the unconfirmed worst case).
    """
    catalogue = w.catalogue()
    latest = catalogue.latest(t, w.origin)
    if "ImageReleaseVersion" in sent:
        version = str(sent["ImageReleaseVersion"])
        release = catalogue.find(version)
        if release is None or not release.released(t, w.origin):
            known = ", ".join(r.version for r in catalogue.available(t, w.origin)) or "none"
            raise validation(
                f"InstanceGroups[{i}].ImageReleaseVersion: {version} is not an available HyperPod AMI release "
                f"(available: {known})"
            )
        image = sent.get("ImageId")
        if image not in (None, "default", release.image_id):
            raise validation(
                f"InstanceGroups[{i}]: ImageId {image} is not the AMI of ImageReleaseVersion {version} "
                f"({release.image_id})"
            )
        return release.version, release.image_id
    if "ImageId" in sent:
        image = str(sent["ImageId"])
        if image == "default":
            return (latest.version, latest.image_id) if latest else (None, "")
        release = catalogue.by_image(image)
        return (release.version, image) if release is not None else (None, image)  # a custom AMI
    if old is not None and w.omitted_members != RESET:
        return old.image_version, old.image_id
    if old is None and c is not None and c.continuous:
        earliest = next((g for g in c.groups.values() if g.status != "Deleting"), None)
        if earliest is not None:
            return earliest.image_version, earliest.image_id
    return (latest.version, latest.image_id) if latest else (None, "")


# --- CreateCluster ------------------------------------------------------------------------------------


def create_cluster(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    name = p["ClusterName"]
    if (account, region, name) in w.by_name:
        raise in_use(f"Cluster {name} already exists")
    _refuse_restricted(p)
    groups = list(p.get("InstanceGroups") or [])
    findings = rules.create_findings(p)
    for i, g in enumerate(groups):
        findings.extend(_plan_findings(w, t, i, g, None, account, region))
    raise_findings(findings)
    continuous = p.get("NodeProvisioningMode") == "Continuous"
    delta: dict[str, int] = {}
    records = []
    for i, g in enumerate(groups):
        group = Group(
            g["InstanceGroupName"], _spec(g), int(g["InstanceCount"]), _min_count(g, continuous), "Creating", 1
        )
        group.image_version, group.image_id = _image_for(w, None, i, g, None, t)
        group.ran_version, group.ran_image_id = group.image_version, group.image_id
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
    scaling = operations.begin_scaling(w, c, t, {})
    control.begin_operation(w, c, t, "create", {}, scaling.operation_id if scaling else None)
    control.arm_plan_boundaries(w, c, t)
    return {"ClusterArn": c.arn}


# --- UpdateCluster ------------------------------------------------------------------------------------


def _reset_findings(sent: list[dict[str, Any]], c: Cluster) -> list[rules.Finding]:
    """Strict mode: an existing group's immutable member left out would be reset, which is a change."""
    out: list[rules.Finding] = []
    for i, g in enumerate(sent):
        old = c.groups.get(g["InstanceGroupName"])
        if old is None:
            continue
        for key in (*rules.IMMUTABLE, "InstanceRequirements"):
            if key in old.spec and key not in g and key != "ExecutionRole":
                out.append((f"InstanceGroups[{i}].{key}", f"omitted, so reset: cannot change {key} (group {old.name})"))
        if "SlurmConfig" in old.spec and "SlurmConfig" not in g:
            out.append(
                (f"InstanceGroups[{i}].SlurmConfig", f"omitted, so reset: NodeType cannot change (group {old.name})")
            )
    return out


def _future_spec(w: World, g: dict[str, Any], old: Group | None) -> dict[str, Any]:
    """The group's configuration once this request is applied (what ``keep`` and ``reset`` mean)."""
    if old is None or w.omitted_members == RESET:
        return _spec(g)
    # Assumption (unconfirmed upstream): a member the update omits keeps its value, so a group
    # created with a LifeCycleConfig keeps it.
    return {**copy.deepcopy(old.spec), **_spec(g)}


def _future_form(
    w: World, c: Cluster, p: dict[str, Any], sent: list[dict[str, Any]], to_delete: list[str]
) -> dict[str, Any]:
    """The cluster as a CreateCluster request after this update (for the whole-cluster rules)."""
    by_name = {g["InstanceGroupName"]: g for g in sent}
    groups = []
    for name, old in c.groups.items():
        if old.status == "Deleting" or name in to_delete:
            continue
        if name in by_name:
            groups.append({**_future_spec(w, by_name[name], old), "InstanceGroupName": name})
        else:
            groups.append({**copy.deepcopy(old.spec), "InstanceGroupName": name})
    groups.extend({**_spec(g)} for g in sent if g["InstanceGroupName"] not in c.groups)
    config = {**copy.deepcopy(c.config), **{k: copy.deepcopy(p[k]) for k in CLUSTER_KEYS if k in p}}
    return {"ClusterName": c.name, **config, "InstanceGroups": groups}


def update_cluster(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = find_cluster(w, p["ClusterName"], account, region)
    _refuse_restricted(p)
    sent = list(p.get("InstanceGroups") or [])
    to_delete = list(p.get("InstanceGroupsToDelete") or [])
    live = {name: g for name, g in c.groups.items() if g.status != "Deleting"}
    eks = rules.is_eks(c.config)
    findings = rules.update_findings(p, {n: g.spec for n, g in live.items()}, eks)
    if w.omitted_members == RESET:
        findings.extend(_reset_findings(sent, c))
        # A re-sent group must name its instance type again: nothing is kept.
        for i, g in enumerate(sent):
            if g["InstanceGroupName"] in live and "InstanceType" not in g and "InstanceRequirements" not in g:
                findings.append(
                    (f"InstanceGroups[{i}].InstanceType", "required (or InstanceRequirements) in reset mode")
                )
    for name in to_delete:
        if name not in live:
            findings.append(("InstanceGroupsToDelete", f"instance group {name} not found in cluster {c.name}"))
        if any(g["InstanceGroupName"] == name for g in sent):
            findings.append(("InstanceGroupsToDelete", f"instance group {name} is also in InstanceGroups"))
    form = _future_form(w, c, p, sent, to_delete)
    if not form["InstanceGroups"]:
        findings.append(("InstanceGroupsToDelete", "the cluster must keep at least one instance group"))
    findings.extend(f for f in rules.topology_findings(form) if f not in findings)
    for i, g in enumerate(sent):
        old = live.get(g["InstanceGroupName"])
        spec = {**_future_spec(w, g, old), "InstanceGroupName": g["InstanceGroupName"]}
        findings.extend(_plan_findings(w, t, i, spec, old, account, region))
    raise_findings(findings)
    images = {
        g["InstanceGroupName"]: _image_for(w, c, i, g, live.get(g["InstanceGroupName"]), t) for i, g in enumerate(sent)
    }

    continuous = c.continuous or p.get("NodeProvisioningMode") == "Continuous"
    touched = [g["InstanceGroupName"] for g in sent] + to_delete
    if c.status != "InService":
        raise conflict(f"Cluster {c.name} is in {c.status} state; it can be updated only when InService")
    checking = operations.in_health_checks(c)
    if checking:
        groups = sorted({n.group for n in checking})
        raise conflict(
            f"Cannot update cluster {c.name}: deep health checks are in progress on instance group(s) "
            f"{', '.join(groups)} ({len(checking)} node(s)); retry when they have finished"
        )
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

    before = operations.snapshot(c)
    snapshot = {name: g.to_dict() for name, g in c.groups.items()}
    for key in CLUSTER_KEYS:
        if key in p:
            c.config[key] = copy.deepcopy(p[key])
    for g in sent:
        name = g["InstanceGroupName"]
        old = c.groups.get(name)
        if old is None:
            new = Group(
                name, _spec(g), int(g["InstanceCount"]), _min_count(g, continuous), "Creating", c.op_counter + 1
            )
            new.image_version, new.image_id = images[name]
            new.ran_version, new.ran_image_id = new.image_version, new.image_id
            c.groups[name] = new
            continue
        if continuous:
            continuous_mode.remember_stable(c, old)
        spec = _future_spec(w, g, old)
        image = images[name]
        changed = (
            spec != old.spec or int(g["InstanceCount"]) != old.target or image != (old.image_version, old.image_id)
        )
        old.spec = spec
        old.target = int(g["InstanceCount"])
        old.image_version, old.image_id = image
        if "MinInstanceCount" in g:
            old.min_count = int(g["MinInstanceCount"])
        elif w.omitted_members == RESET:
            old.min_count = _min_count({**g, "InstanceCount": old.target}, continuous)
        if changed and not continuous:
            old.status = "Updating"
    for name in to_delete:
        c.groups[name].status = "Deleting"
    scaling = operations.begin_scaling(w, c, t, before)
    op_id = scaling.operation_id if scaling else None
    if continuous:
        control.continuous_update(w, c, t, touched)
    else:
        control.begin_operation(w, c, t, "update", snapshot, op_id)
    control.arm_plan_boundaries(w, c, t)
    w.touch(c)
    return {"ClusterArn": c.arn}


# --- the rest ---------------------------------------------------------------------------------------------


def delete_cluster(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = find_cluster(w, p["ClusterName"], account, region)
    if c.status == "Deleting":
        raise conflict(f"Cluster {c.name} is already being deleted")
    control.begin_delete(w, c, t)
    return {"ClusterArn": c.arn}


def describe_cluster(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    return views.describe_cluster(w, find_cluster(w, p["ClusterName"], account, region), t)


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
