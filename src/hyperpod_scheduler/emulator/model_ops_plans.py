"""The training plan operations: DescribeTrainingPlan and ListTrainingPlans (as the model defines them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hyperpod_scheduler.emulator import model_views as views
from hyperpod_scheduler.emulator.errors import not_found, validation
from hyperpod_scheduler.emulator.model_plans import ACTIVE, TrainingPlan
from hyperpod_scheduler.emulator.model_world import World


def _duration(start: datetime, end: datetime) -> tuple[int, int]:
    minutes = int((end - start).total_seconds() // 60)
    return minutes // 60, minutes % 60


def _in_use(w: World, plan: TrainingPlan) -> int:
    return sum(n for (arn, _), n in w.plan_usage.items() if arn == plan.arn)


def summary(w: World, plan: TrainingPlan, t: datetime) -> dict[str, Any]:
    start, end = plan.start(w.origin), plan.end(w.origin)
    hours, minutes = _duration(start, end)
    total = sum(b.count for b in plan.blocks)
    active = sum(b.count for b in plan.blocks if b.status(t, w.origin) == ACTIVE)
    in_use = _in_use(w, plan)
    blocks = []
    for i, b in enumerate(plan.blocks):
        b_start, b_end = b.start(w.origin), b.end(w.origin)
        b_hours, b_minutes = _duration(b_start, b_end)
        blocks.append(
            {
                "ReservedCapacityArn": (
                    f"arn:aws:sagemaker:{plan.region}:{plan.account}:reserved-capacity/{plan.name}-{i + 1}"
                ),
                "ReservedCapacityType": "Instance",
                "InstanceType": b.instance_type,
                "TotalInstanceCount": b.count,
                "Status": b.status(t, w.origin),
                "AvailabilityZone": f"{plan.region}a",
                "AvailabilityZoneId": views.zone_id(plan.region),
                "DurationHours": b_hours,
                "DurationMinutes": b_minutes,
                "StartTime": b_start,
                "EndTime": b_end,
            }
        )
    out: dict[str, Any] = {
        "TrainingPlanArn": plan.arn,
        "TrainingPlanName": plan.name,
        "Status": plan.status(t, w.origin),
        "DurationHours": hours,
        "DurationMinutes": minutes,
        "StartTime": start,
        "EndTime": end,
        "TotalInstanceCount": total,
        "AvailableInstanceCount": max(0, active - in_use),
        "InUseInstanceCount": in_use,
        "TargetResources": ["hyperpod-cluster"],
        "ReservedCapacitySummaries": blocks,
    }
    if plan.upfront_fee is not None:
        out["UpfrontFee"] = plan.upfront_fee
        out["CurrencyCode"] = plan.currency
    return out


def _visible(w: World, account: str, region: str) -> list[TrainingPlan]:
    return [p for p in w.plans().values() if p.account == account and p.region == region]


def describe_training_plan(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    wanted = p["TrainingPlanName"]
    for plan in _visible(w, account, region):
        if wanted in (plan.name, plan.arn):
            out = summary(w, plan, t)
            out["UnhealthyInstanceCount"] = 0
            out["AvailableSpareInstanceCount"] = 0
            return out
    raise not_found(f"Training plan {wanted} not found")


def list_training_plans(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    after, before = p.get("StartTimeAfter"), p.get("StartTimeBefore")
    statuses = set()
    for f in p.get("Filters") or []:
        if f["Name"] != "Status":
            raise validation(f"Filters: unknown filter name {f['Name']!r}")
        statuses.add(f["Value"])
    found = [
        plan
        for plan in _visible(w, account, region)
        if (after is None or plan.start(w.origin) > after)
        and (before is None or plan.start(w.origin) < before)
        and (not statuses or plan.status(t, w.origin) in statuses)
    ]
    sort_by = p.get("SortBy", "StartTime")
    if sort_by == "TrainingPlanName":
        found.sort(key=lambda plan: plan.name)
    elif sort_by == "Status":
        found.sort(key=lambda plan: (plan.status(t, w.origin), plan.name))
    else:
        found.sort(key=lambda plan: (plan.start(w.origin), plan.name))
    if p.get("SortOrder") == "Descending":
        found.reverse()
    chunk, token = views.page(found, p)
    out: dict[str, Any] = {"TrainingPlanSummaries": [summary(w, plan, t) for plan in chunk]}
    if token:
        out["NextToken"] = token
    return out
