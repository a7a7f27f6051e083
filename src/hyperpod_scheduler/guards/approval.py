"""Approval before release: a scheduled stop releases a group the policy names (``approve_release``:
a list of groups, or ``scarce``) only if a person approved that stop. No answer by the stop time, or a
refusal, keeps the group at its size. A stop a person asks for (``stop``, the dashboard) is its own
approval.

The guard only reads: the request, its token and the answer live in the cluster's record
(``engine.approvals`` asks; the dashboard's confirm page answers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hyperpod_scheduler.cluster.view import ClusterView
from hyperpod_scheduler.config.model import Policy
from hyperpod_scheduler.guards.base import Guard, StopContext, Verdict
from hyperpod_scheduler.guards.capacity import HEAD_NODE_TYPES, protections, scarce_type
from hyperpod_scheduler.store.records import Approval


def needs_approval(view: ClusterView, policy: Policy, releasing: Sequence[str] | None = None) -> list[str]:
    """The groups with nodes a stop would release (not kept by the capacity policy) that need approval."""
    wanted = policy.approve_release
    if not wanted:
        return []
    kept = {p.group for p in protections(view.groups, policy)}
    extra = tuple(policy.scarce_families or ())
    out = []
    for g in view.groups:
        if max(g.current, g.target) == 0 or g.name in kept:
            continue
        if releasing is not None and g.name not in releasing:
            continue
        if (wanted == "scarce" and scarce_type(g, extra) is not None) or (
            isinstance(wanted, list) and g.name in wanted
        ):
            out.append(g.name)
    return out


class ApprovalGuard(Guard):
    name = "approval"

    def __init__(self, policy: Policy, approvals: Callable[[str], Sequence[Approval]]) -> None:
        self.policy = policy
        self.approvals = approvals

    def before_stop(self, ctx: StopContext) -> Verdict:
        needed = needs_approval(ctx.view, self.policy, ctx.groups_to_zero)
        if not needed:
            return Verdict(self.name, "allow", "no group needs approval")
        if ctx.origin == "manual":
            return Verdict(self.name, "allow", "asked for by a person: no approval needed")
        asked = [a for a in self.approvals(ctx.key) if a.transition_at == ctx.transition_at]
        approval = asked[-1] if asked else None
        state = approval.state_at(ctx.now) if approval else None
        if approval is not None and state == "approved" and set(needed) <= set(approval.groups):
            return Verdict(
                self.name,
                "allow",
                f"release of {', '.join(needed)} approved by {approval.by} at {approval.decided_at:%H:%M}Z",
                detail={"approval": approval.id, "state": "approved", "by": approval.by},
            )
        if approval is None and ctx.transition_at is not None and ctx.now < ctx.transition_at:
            # Asked before the stop (a forecast): the request goes out approval_minutes before it.
            why = "released only with a person's approval (asked before the stop; no answer keeps it)"
        elif approval is None:
            why = "no approval was asked for in time"
        elif state == "refused":
            why = f"release refused by {approval.by} at {approval.decided_at:%H:%M}Z"
        elif state == "approved":
            why = f"approved for {', '.join(approval.groups)} only"
        elif ctx.now < approval.expires_at:  # asked before the stop (a preview): no answer yet
            why = f"awaiting approval until {approval.expires_at:%H:%M}Z (no answer keeps it)"
        else:
            why = f"nobody approved the release by {approval.expires_at:%H:%M}Z (lapsed)"
        floors = {g.name: max(g.current, g.target) for g in ctx.view.groups if g.name in needed}
        if self.policy.keep_slurm_head is not False:
            # Kept workers keep their controller (and login), as the capacity guard's do.
            for g in ctx.view.groups:
                if g.node_type in HEAD_NODE_TYPES and max(g.current, g.target) > 0:
                    floors[g.name] = max(g.current, g.target)
        summary = "; ".join(f"keeping '{n}' at {c}: {why}" for n, c in floors.items())
        return Verdict(
            self.name,
            "keep",
            summary,
            floors=floors,
            detail={
                "approval": approval.id if approval else None,
                "state": "lapsed" if state == "pending" else (state or "not asked"),
                "by": approval.by if approval else None,
                "reasons": {
                    n: why if n in needed else f"the Slurm head stays with {', '.join(needed)}" for n in floors
                },
                "kinds": {n: "approval" if n in needed else "slurm head" for n in floors},
            },
        )
