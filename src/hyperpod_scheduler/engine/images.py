"""Patched by morning: which HyperPod AMI release each group is restored on (issue 32). Pure decisions.

A group on a HyperPod-managed release, at zero while the cluster sleeps, may be moved to another
release before the morning restore (``engine.image_update`` sends it through UpdateClusterSoftware);
the restore then pins the release the group now wants. Never moved: a group on a custom AMI (it reports
no release version), a group with nodes (a software update would roll through nodes doing work), a
release younger than the policy's settling age, a release the group's first morning failed on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from hyperpod_scheduler.aws.failures import FailureCause
from hyperpod_scheduler.cluster.view import ClusterView, GroupView
from hyperpod_scheduler.engine.ref import ClusterRef, ImagePolicy
from hyperpod_scheduler.store.records import GroupOutcome, ImageState, ImageUpdate, ImageWhy

# ImageVersionStatus values (botocore's model) that the `security` policy acts on.
NEEDS_UPDATE = frozenset({"SecurityUpdateRequired", "EndOfLife"})
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


@dataclass(frozen=True)
class Release:
    """A HyperPod AMI release as a release source knows it: when it was published, and whether it
    is a security update (what makes older releases SecurityUpdateRequired)."""

    version: str
    published_at: datetime
    security_update: bool = False


# Where a cluster's known releases come from (no HyperPod API lists them: docs/scheduler.md).
Releases = Callable[[ClusterRef], Sequence[Release]]


def version_key(version: str) -> tuple[int, int, int] | None:
    m = _VERSION.match(version)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def managed_release(g: GroupView) -> str | None:
    """The release the group will launch its nodes on, or None for a custom AMI (never changed)."""
    for key in ("DesiredImageReleaseVersion", "CurrentImageReleaseVersion"):
        value = g.details.get(key)
        if isinstance(value, str) and version_key(value) is not None:
            return value
    return None


def at_zero(g: GroupView) -> bool:
    return g.current == 0 and g.target == 0


def _newer(releases: Iterable[Release], than: str) -> list[Release]:
    floor = version_key(than)
    out = [r for r in releases if (k := version_key(r.version)) is not None and floor is not None and k > floor]
    return sorted(out, key=lambda r: version_key(r.version) or (0, 0, 0))


# Why a group whose policy would move it stays on its release this morning, though AWS or the release
# source says a newer one exists: ``unknown`` (DescribeCluster's ImageVersionStatus says a newer release
# exists, the release source knows none: which one, and since when, is not guessed), ``settling`` (the
# newest is known but younger than the settling age), ``unflagged`` (SecurityUpdateRequired, but no known
# newer release is marked a security update, so which one is the patch is not known).
GapWhy = Literal["unknown", "settling", "unflagged"]


@dataclass(frozen=True)
class ImageGap:
    """A group a non-pinned policy leaves on its release this morning, and why (``line`` says it)."""

    group: str
    current: str
    status: str | None
    why: GapWhy
    release: str | None = None  # the newer release known (settling)
    settles_at: datetime | None = None  # when it is old enough (settling)


def plan(
    view: ClusterView,
    state: ImageState,
    policy: ImagePolicy,
    releases: Sequence[Release],
    now: datetime,
    asleep: Collection[str] | None = None,
) -> list[ImageUpdate]:
    """The release changes this morning's restore should be preceded by, group by group. ``asleep``:
    the groups taken to be at zero (the evening's forecast: those tonight's stop releases)."""
    return [d for d in _decide(view, state, policy, releases, now, asleep) if isinstance(d, ImageUpdate)]


def gaps(
    view: ClusterView,
    state: ImageState,
    policy: ImagePolicy,
    releases: Sequence[Release],
    now: datetime,
    asleep: Collection[str] | None = None,
) -> list[ImageGap]:
    """The groups ``plan`` leaves where they are although a newer release exists (said, never guessed)."""
    return [d for d in _decide(view, state, policy, releases, now, asleep) if isinstance(d, ImageGap)]


def _decide(
    view: ClusterView,
    state: ImageState,
    policy: ImagePolicy,
    releases: Sequence[Release],
    now: datetime,
    asleep: Collection[str] | None,
) -> list[ImageUpdate | ImageGap]:
    out: list[ImageUpdate | ImageGap] = []
    for g in view.groups:
        current = managed_release(g)
        if current is None or not (at_zero(g) if asleep is None else g.name in asleep):
            continue
        refused = set(state.refused.get(g.name, ()))
        if current in refused:
            # Its first morning on this release failed: back to the last release it ran well on.
            good = state.good.get(g.name)
            if good is not None and good != current:
                out.append(ImageUpdate(group=g.name, from_release=current, to_release=good, why="rolled back"))
            continue
        mode = policy.mode(g.name)
        if mode == "pinned":
            continue
        status = g.details.get("ImageVersionStatus")
        status = status if isinstance(status, str) else None
        known = _newer(releases, current)
        newer = [r for r in known if r.version not in refused]
        settled = [r for r in newer if now - r.published_at >= policy.settle]
        security = status == "EndOfLife" or (status in NEEDS_UPDATE and any(r.security_update for r in settled))
        if settled and (mode == "latest" or security):
            why: ImageWhy = "security update" if security else "latest"
            out.append(ImageUpdate(group=g.name, from_release=current, to_release=settled[-1].version, why=why))
            continue
        gap = None if known and not newer else _gap(g.name, current, status, mode, newer, settled, policy)
        # (every newer release known was refused for this group: the refusal says so, not a gap)
        if gap is not None:
            out.append(gap)
    return out


def _gap(
    group: str,
    current: str,
    status: str | None,
    mode: str,
    newer: Sequence[Release],
    settled: Sequence[Release],
    policy: ImagePolicy,
) -> ImageGap | None:
    wants = NEEDS_UPDATE if mode == "security" else NEEDS_UPDATE | {"UpdateAvailable"}
    if mode == "latest":
        unsettled = [r for r in newer if r not in settled]
    elif status in NEEDS_UPDATE:  # security: a release that would be taken once settled
        unsettled = [r for r in newer if r not in settled and (r.security_update or status == "EndOfLife")]
    else:
        unsettled = []
    if unsettled:
        first = unsettled[0]
        return ImageGap(group, current, status, "settling", first.version, first.published_at + policy.settle)
    if status in wants and not newer:
        return ImageGap(group, current, status, "unknown")
    if mode == "security" and status == "SecurityUpdateRequired" and settled:
        return ImageGap(group, current, status, "unflagged")
    return None


def gap_line(gaps_: Sequence[ImageGap]) -> str:
    """``gpu: AMI 1.2.1 is SecurityUpdateRequired, but no newer release is known ...``, one per group."""
    return "; ".join(_gap_text(g) for g in gaps_)


def _gap_text(g: ImageGap) -> str:
    if g.why == "settling" and g.settles_at is not None:
        return f"{g.group}: AMI {g.release} is taken once settled, from {g.settles_at:%Y-%m-%d %H:%M}Z"
    if g.why == "unflagged":
        return (
            f"{g.group}: AMI {g.current} is SecurityUpdateRequired, but no known newer release is marked a "
            f"security update (image_releases: security: true): it stays on {g.current}"
        )
    return (
        f"{g.group}: AMI {g.current} is {g.status}, but no newer release is known (list it in image_releases): "
        f"it stays on {g.current}"
    )


def applied(view: ClusterView, updates: Sequence[ImageUpdate]) -> bool:
    """Whether the cluster's groups want the releases ``updates`` name (the call went out)."""
    for u in updates:
        g = view.group(u.group)
        if g is None or g.details.get("DesiredImageReleaseVersion") != u.to_release:
            return False
    return True


def request(view: ClusterView, updates: Sequence[ImageUpdate]) -> dict[str, object]:
    """The UpdateClusterSoftware request: the groups by name and their new ImageReleaseVersion."""
    return {
        "ClusterName": view.name,
        "InstanceGroups": [{"InstanceGroupName": u.group, "ImageReleaseVersion": u.to_release} for u in updates],
    }


def _fault_of_release(o: GroupOutcome) -> bool:
    # A start that failed for want of capacity says nothing about the release its nodes would have run.
    return o.outcome in ("failed", "partial") and o.cause is not FailureCause.CAPACITY


def judged(state: ImageState, outcomes: Sequence[GroupOutcome], view: ClusterView) -> ImageState:
    """After a start settled: a release on its first morning is good if its group came up, refused if
    it failed there; every group restored well has its release remembered as its last good one."""
    good = dict(state.good)
    refused: dict[str, list[str]] = {g: list(v) for g, v in state.refused.items()}
    by_group: Mapping[str, GroupOutcome] = {o.group: o for o in outcomes}
    for o in by_group.values():
        g = view.group(o.group)
        release = managed_release(g) if g is not None else None
        if o.outcome == "restored" and release is not None:
            good[o.group] = release
    trial = dict(state.trial)
    for group, release in state.trial.items():
        judged_by = by_group.get(group)
        if judged_by is None:
            continue
        if judged_by.outcome == "restored":
            good[group] = release
        elif _fault_of_release(judged_by):
            if release not in refused.get(group, []):
                refused.setdefault(group, []).append(release)
        else:
            continue  # short of capacity: still on trial when a retry brings it up
        trial.pop(group)
    return state.evolve(good=good, refused=refused, trial=trial, taken=[])


def line(updates: Sequence[ImageUpdate]) -> str:
    """``gpu: AMI 1.2.1 → 1.3.0, security update``, one clause per group."""
    return "; ".join(f"{u.group}: AMI {u.from_release or '?'} → {u.to_release}, {u.why}" for u in updates)
