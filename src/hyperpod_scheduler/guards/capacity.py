"""The capacity gamble: which groups a stop keeps, and why.

Scale-in hands instances back to the pool, and nothing promises scarce ones back in the morning.
This guard keeps, per group: training-plan groups (reserved, prepaid: releasing saves nothing and
risks the reservation), scarce families unless the cluster releases them explicitly, groups whose
policy is `keep` or a floor, and the Slurm head (Controller and Login groups) when `keep_slurm_head`
is set, or, by default, whenever a Compute group stays up overnight: compute nodes kept without their
controller bill at full price for nothing a job can use, and the controller's queue is lost with its
root volume. ``keep_slurm_head: false`` (or ``zero`` on the head group) still zeroes it.

A flexible group (``InstanceRequirements``) is judged by every type it may run (``GroupView.instance_types``):
it is as scarce as its scarcest type. A group whose Slurm role could not be learned (no SlurmConfig and an
unreadable provisioning_parameters.json: ``GroupView.role_unknown``) may be the controller, so it is kept
whenever the head would be.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hyperpod_scheduler.cluster.view import GroupView
from hyperpod_scheduler.config.model import Policy
from hyperpod_scheduler.guards.base import Guard, StopContext, Verdict

# P4d/P4de, P5/P5e/P5en, every P6 variant, Trn2: the families capacity reports show as hard to get back.
SCARCE_FAMILIES = ("p4d", "p4de", "p5", "p5e", "p5en", "p6", "trn2")
HEAD_NODE_TYPES = ("Controller", "Login")
_FAMILY = re.compile(r"^ml\.(?P<family>[a-z0-9-]+)\.")


def family_of(instance_type: str | None) -> str | None:
    match = _FAMILY.match(instance_type or "")
    return match.group("family") if match else None


def is_scarce(instance_type: str | None, extra: tuple[str, ...] = ()) -> bool:
    family = family_of(instance_type)
    if family is None:
        return False
    base = family.split("-")[0]  # p6e-gb200 -> p6e
    for scarce in (*SCARCE_FAMILIES, *extra):
        if family == scarce or base == scarce or (scarce == "p6" and base.startswith("p6")):
            return True
    return False


def scarce_type(group: GroupView, extra: tuple[str, ...] = ()) -> str | None:
    """The first scarce type ``group`` may run (a flexible group is as scarce as its scarcest type), or None."""
    return next((t for t in group.instance_types if is_scarce(t, extra)), None)


def scarce_text(group: GroupView, scarce: str) -> str:
    """``ml.p5.48xlarge``, or ``ml.p5.48xlarge among the flexible group's ml.p5.48xlarge, ml.g6.48xlarge``."""
    if not group.flexible:
        return scarce
    return f"{scarce} among the flexible group's {', '.join(group.instance_types)}"


@dataclass(frozen=True)
class Protection:
    group: str
    keep_at: int  # the count the stop leaves (current size, or a floor)
    reason: str
    overridable: bool  # --include-protected may release it
    # What keeps it, for a face to name (the reason says it in words): training plan, keep, floor,
    # scarce, slurm head (kept with compute, or keep_slurm_head), role unknown.
    kind: str = "protected"


def protections(groups: tuple[GroupView, ...], policy: Policy) -> list[Protection]:
    """Every group a stop would not zero under ``policy``, with the reason (pure)."""
    out = []
    extra = tuple(policy.scarce_families or ())
    per_group = policy.groups or {}
    head: list[GroupView] = []
    unknown: list[GroupView] = []
    for g in groups:
        size = max(g.current, g.target)
        explicit = per_group.get(g.name)
        if g.training_plan_arn:
            out.append(
                Protection(
                    g.name,
                    size,
                    "on a training plan: reserved, prepaid capacity; stopping it "
                    "saves nothing and risks the reservation",
                    overridable=False,
                    kind="training plan",
                )
            )
        elif explicit == "keep":
            out.append(Protection(g.name, size, "policy keep", overridable=True, kind="keep"))
        elif isinstance(explicit, dict):
            floor = min(explicit["floor"], size)
            if floor > 0:
                why = f"policy floor {explicit['floor']}"
                out.append(Protection(g.name, floor, why, overridable=True, kind="floor"))
        elif explicit == "zero":
            continue
        elif (scarce := scarce_type(g, extra)) is not None and not policy.release_scarce_capacity:
            out.append(
                Protection(
                    g.name,
                    size,
                    f"scarce capacity ({scarce_text(g, scarce)}) is not released without release_scarce_capacity: true",
                    overridable=True,
                    kind="scarce",
                )
            )
        elif g.node_type in HEAD_NODE_TYPES:
            head.append(g)
        elif g.role_unknown is not None:
            unknown.append(g)
    out = [p for p in out if p.keep_at > 0]
    out += _head_protections(head, groups, out, policy)
    return out + _unknown_role_protections(unknown, out, policy)


def _head_protections(
    head: list[GroupView], groups: tuple[GroupView, ...], kept: list[Protection], policy: Policy
) -> list[Protection]:
    """The Slurm head stays when asked to, or (unless ``keep_slurm_head: false``) with any kept compute group.

    Kept with workers, the head is only as releasable as they are: a training-plan group that can never
    be released keeps its controller even under ``--include-protected``."""
    if policy.keep_slurm_head is False:
        return []
    compute = {g.name for g in groups if g.node_type == "Compute"}
    workers = [p for p in kept if p.group in compute]
    if policy.keep_slurm_head:
        why, overridable = "keep_slurm_head: the Slurm {role} stays up", True
    elif workers:
        named = ", ".join(f"'{w.group}'" for w in workers)
        why = (
            f"the Slurm {{role}} stays up with the compute group{'s' if len(workers) > 1 else ''} {named} "
            "kept overnight (set keep_slurm_head: false to zero it)"
        )
        overridable = all(w.overridable for w in workers)
    else:
        return []
    out = []
    for g in head:
        size = max(g.current, g.target)
        if size > 0:
            role = (g.node_type or "head").lower()
            out.append(Protection(g.name, size, why.format(role=role), overridable=overridable, kind="slurm head"))
    return out


def _unknown_role_protections(unknown: list[GroupView], kept: list[Protection], policy: Policy) -> list[Protection]:
    """Groups whose Slurm role is unknown stay whenever the head would: with any group that stays up, or
    always under ``keep_slurm_head: true`` (any of them may be the controller). ``keep_slurm_head: false``
    says the head may go, so they are zeroed like any other group."""
    if policy.keep_slurm_head is False or not unknown:
        return []
    if policy.keep_slurm_head:
        why, overridable = "keep_slurm_head asks for the Slurm head and this group may be it", True
    elif kept:
        named = ", ".join(f"'{p.group}'" for p in kept)
        why = f"kept with the compute kept ({named}): this group may be the Slurm controller or login"
        overridable = all(p.overridable for p in kept)
    else:
        return []
    out = []
    for g in unknown:
        size = max(g.current, g.target)
        if size > 0:
            reason = f"Slurm roles unknown: {g.role_unknown}; {why} (set keep_slurm_head: false to zero it)"
            out.append(Protection(g.name, size, reason, overridable=overridable, kind="role unknown"))
    return out


class CapacityGuard(Guard):
    """Keeps protected groups; ``include_protected`` releases, for one run, everything but training plans
    (and the Slurm head kept with them)."""

    name = "capacity"

    def __init__(self, policy: Policy, include_protected: bool = False) -> None:
        self.policy = policy
        self.include_protected = include_protected

    def before_stop(self, ctx: StopContext) -> Verdict:
        found = [p for p in protections(ctx.view.groups, self.policy) if not (self.include_protected and p.overridable)]
        if not found:
            return Verdict(self.name, "allow", "no protected groups")
        floors = {p.group: p.keep_at for p in found}
        reasons = {p.group: p.reason for p in found}
        kinds = {p.group: p.kind for p in found}
        overridable = {p.group: p.overridable for p in found}
        summary = "; ".join(f"keeping '{p.group}' at {p.keep_at}: {p.reason}" for p in found)
        detail = {"reasons": reasons, "kinds": kinds, "overridable": overridable}
        return Verdict(self.name, "keep", summary, floors=floors, detail=detail)


def head_warning(groups: tuple[GroupView, ...], policy: Policy, kept: set[str] | None = None) -> str | None:
    """What `plan` says when a stop zeroes the Slurm controller. ``kept``: the groups the stop keeps, as
    the planner and every guard decide it (``engine.stop_forecast``); else this policy's protections."""
    kept = {p.group for p in protections(groups, policy)} if kept is None else kept
    if any(g.node_type == "Controller" and g.name not in kept for g in groups):
        return (
            "the stop zeroes the Slurm controller: the queue (/var/spool/slurmctld) and accounting state on its "
            "root volume are lost; set keep_slurm_head: true to keep it"
        )
    return None
