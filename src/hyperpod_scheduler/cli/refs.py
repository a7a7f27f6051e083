"""Which cluster a command names: governed by the config (with its own target's settings), remembered
by the store, or one AWS knows, reached through ``--region`` and ``--profile`` when a name alone is not
enough (two accounts can each have a cluster of that name)."""

from __future__ import annotations

from botocore.exceptions import ClientError

from hyperpod_scheduler.cli.context import Context
from hyperpod_scheduler.engine.fleet import OUTSIDE, ref_for
from hyperpod_scheduler.engine.identity import reach_of
from hyperpod_scheduler.engine.ref import ClusterRef
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import args
from hyperpod_scheduler.inputs.text import quoted


def cluster_ref(ctx: Context, name: str, region: str | None, profile: str | None) -> ClusterRef:
    """The cluster ``name`` as the config governs it, else as the store keeps it (defaults' settings)."""
    return governed_ref(ctx, name, region, profile)[0]


def governed_ref(ctx: Context, name: str, region: str | None, profile: str | None) -> tuple[ClusterRef, bool]:
    """``cluster_ref`` and whether the config governs it, from one look at the fleet (a tag-selected
    target's discovery lists clusters and tags: it is not made twice for one command)."""
    args.cluster_name(name)  # before it is looked up, stored or used as a key
    # As given first: a config may list the cluster by its ARN (its tick keeps the record there).
    governed = ctx.fleet().find(name, region, profile) if ctx.config.targets else None
    if governed is None and name.startswith("arn:"):
        name, region = _by_name(ctx, name, region, profile)
        governed = ctx.fleet().find(name, region, profile) if ctx.config.targets else None
    if governed is not None:
        return governed.ref, True
    ref = ref_for(name, region, profile).governed(ctx.fleet().settings(OUTSIDE))
    account = ctx.store.account_for(reach_of(ref))  # so a face reads the record where the engine keeps it
    return (ref.with_account(account) if account is not None else ref), False


def _by_name(ctx: Context, name: str, region: str | None, profile: str | None) -> tuple[str, str | None]:
    """A cluster named by its ARN, as the name and region its records are kept under (one DescribeCluster
    says its name). Kept under the ARN, a stop's sizes were where a start by name, or the schedule's, never
    looked: "nothing recorded", the sizes as good as lost."""
    if not name.startswith("arn:"):
        return name, region
    parts = name.split(":", 5)  # arn:PARTITION:sagemaker:REGION:ACCOUNT:cluster/ID
    in_arn = parts[3] if len(parts) == 6 and parts[3] else None
    if region is not None and in_arn is not None and region != in_arn:
        raise UsageError(f"--region {quoted(region)} is not the region of cluster ARN {quoted(name)} ({in_arn})")
    where = in_arn or region
    by_arn = ref_for(name, where, profile)
    account = ctx.store.account_for(reach_of(by_arn))
    if account is not None and ctx.store.get(by_arn.with_account(account).key) is not None:
        return name, where  # sizes an earlier release kept under the ARN: found where they are
    try:
        return ctx.engine().describe(by_arn).name, where
    except ClientError as exc:
        if not_found(exc):
            raise UsageError(
                f"cluster ARN {quoted(name)} not found in {by_arn.region} (a deleted cluster's records are "
                "found by its name)"
            ) from None
        raise


def known_ref(ctx: Context, name: str, region: str | None, profile: str | None, what: str) -> ClusterRef:
    """A cluster a record command may name: governed, remembered, or one AWS knows."""
    ref, governed = governed_ref(ctx, name, region, profile)
    if governed or ctx.store.get(ref.key) is not None:
        return ref
    try:
        ctx.engine().describe(ref)
    except ClientError as exc:
        if not_found(exc):
            raise UsageError(
                f"{what}: cluster {name!r} not found in {ref.region} (not in the config, the state store or AWS)"
            ) from None
        raise
    return ref


def not_found(exc: ClientError) -> bool:
    err = exc.response.get("Error", {})
    return err.get("Code") in ("ResourceNotFound", "ResourceNotFoundException") or (
        err.get("Code") == "ValidationException" and "not found" in str(err.get("Message", "")).lower()
    )
