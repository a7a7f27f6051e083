"""Shared by the operations: finding a cluster by name or ARN, rule findings as errors, account quotas."""

from __future__ import annotations

from hyperpod_scheduler.emulator.errors import limit_exceeded, not_found, validation
from hyperpod_scheduler.emulator.model_rules import Finding, message
from hyperpod_scheduler.emulator.model_state import Cluster
from hyperpod_scheduler.emulator.model_world import World


def raise_findings(findings: list[Finding]) -> None:
    """One ValidationException listing every finding (AWS reports all it found, not the first)."""
    if findings:
        raise validation(message(findings))


def find_cluster(w: World, name_or_arn: str, account: str, region: str) -> Cluster:
    if name_or_arn.startswith("arn:"):
        c = w.clusters.get(name_or_arn)
        if c is not None and c.account == account and c.region == region:
            return c
    else:
        arn = w.by_name.get((account, region, name_or_arn))
        if arn is not None:
            return w.clusters[arn]
    raise not_found(f"Cluster {name_or_arn} not found")


def check_quota(w: World, account: str, region: str, delta: dict[str, int], exclude: str | None) -> None:
    for itype, more in delta.items():
        quota = w.capacity.pool(itype).quota
        if quota is None or more <= 0:
            continue
        used = sum(
            g.target
            for c in w.clusters.values()
            if c.account == account and c.region == region and c.arn != exclude
            for g in c.groups.values()
            if g.instance_type == itype
        )
        if used + more > quota:
            raise limit_exceeded(
                f"The account-level service limit '{itype} for cluster usage' is {quota} Instances, with "
                f"current utilization of {used} Instances and a request delta of {more} Instances. "
                "Please use AWS Service Quotas to request an increase for this quota."
            )
