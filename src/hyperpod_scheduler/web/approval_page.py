"""The approval link's page: what a release would do, and answering it once."""

from __future__ import annotations

from typing import Any

from hyperpod_scheduler.app.actions import check_by
from hyperpod_scheduler.engine import approvals
from hyperpod_scheduler.web import approval_view
from hyperpod_scheduler.web.core import DashboardCore, NotFound, Refused
from hyperpod_scheduler.web.places import ANYWHERE, Place


def approval(dash: DashboardCore, name: str, approval_id: str, token: str, place: Place = ANYWHERE) -> dict[str, Any]:
    """What the confirm page shows for an approval link; the link's token is its only authority."""
    ctx = dash.context()
    try:
        g = dash.governed(ctx, name, place, holding=approval_id)
        key = (ctx.engine().accounts.known(g.ref) or g.ref).key
        record = ctx.store.get(key)
        try:
            a = approvals.find(record, approval_id)
            approvals.check(a, token, ctx.now())
            problem = ""
        except approvals.ApprovalError as exc:
            if "no such request" in str(exc):
                raise NotFound(str(exc)) from None
            a, problem = approvals.find(record, approval_id), str(exc)
        return {
            "cluster": name,
            "where": dash.address(ctx, name, g.ref),
            "id": a.id,
            "groups": a.groups,
            "stop": a.transition_at.isoformat(),
            "expires": a.expires_at.isoformat(),
            "state": a.state_at(ctx.now()),
            "by": a.by,
            "problem": problem,
            "timezone": getattr(g.schedule.timezone, "key", str(g.schedule.timezone)),
            "figures": approval_view.figures(
                a.groups, dash.describe_cached(ctx, g.ref), ctx.prices(), g.schedule, a.transition_at, a.expires_at
            ),
        }
    finally:
        if ctx is not dash.fixed_context:
            ctx.close()


def answer_approval(
    dash: DashboardCore, name: str, approval_id: str, token: str, approve: bool, by: str, place: Place = ANYWHERE
) -> dict[str, Any]:
    """Approve or refuse a release, once, before its stop; who answered goes into the history."""
    ctx = dash.context()
    try:
        g = dash.governed(ctx, name, place, holding=approval_id)
        key = (ctx.engine().accounts.known(g.ref) or g.ref).key
        try:
            a = approvals.decide(ctx.store, key, approval_id, token, approve, check_by(by, "by"), ctx.now())
        except approvals.ApprovalError as exc:
            raise Refused(str(exc), 409) from None
        verb = "approved" if approve else "refused"
        return {
            "cluster": name,
            "where": dash.address(ctx, name, g.ref),
            "id": a.id,
            "state": a.state,
            "by": a.by,
            "message": f"release of {', '.join(a.groups)} at {a.transition_at:%a %H:%M}Z {verb} by {a.by}",
        }
    finally:
        if ctx is not dash.fixed_context:
            ctx.close()
