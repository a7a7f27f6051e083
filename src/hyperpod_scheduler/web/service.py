"""What the dashboard shows and does, as plain dicts (the JSON API returns them; the pages render them).

The shell around the library: config, state store, clock and AWS clients come from a ``Dashboard``;
every figure comes from the same functions the CLI uses (fleet, schedule, cost, guards, engine).
This module only puts the pages together: the shared core is ``web.core``, and each page is plain
functions in its own module (``fleet_view``, ``tonight``, ``cluster_view``, ``manual``,
``schedules_view``, ``approval_page``, ``savings_view``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, tzinfo
from typing import Any

from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.engine.fleet import Governed, ref_for
from hyperpod_scheduler.web import approval_page, cluster_view, fleet_view, manual, savings_view, schedules_view
from hyperpod_scheduler.web import grid as grids
from hyperpod_scheduler.web.core import ACTIONS, DashboardCore, NotFound, Refused


class Dashboard(DashboardCore):
    """Everything the app needs; ``token`` None makes it read-only. Each page is its module's function."""

    def fleet(
        self,
        month: dict[str, Any] | None = None,
        ctx: Context | None = None,
        found: Sequence[Governed] | None = None,
    ) -> list[dict[str, Any]]:
        return fleet_view.fleet(self, month, ctx, found)

    def fleet_page(self) -> dict[str, Any]:
        return fleet_view.fleet_page(self)

    def week(self, ctx: Context, rows: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
        return fleet_view.week(ctx, rows, now)

    def cluster(self, name: str, start_text: str | None = None, viewer: tzinfo | None = None) -> dict[str, Any]:
        return cluster_view.cluster(self, name, start_text, viewer)

    def preview(self, name: str, action: str) -> dict[str, Any]:
        return manual.preview(self, name, action)

    def act(
        self,
        name: str,
        action: str,
        token: str | None,
        by: str = "",
        until: str | None = None,
        hold_state: str = "running",
        reason: str = "",
    ) -> dict[str, Any]:
        return manual.act(self, name, action, token, by, until, hold_state, reason)

    def savings(self, since_text: str | None = None, until_text: str | None = None) -> dict[str, Any]:
        return savings_view.savings(self, since_text, until_text)

    def schedules(self, tz: str | None) -> dict[str, Any]:
        return schedules_view.schedules(self, tz)

    def save_schedule(self, name: str, grid: grids.Grid, token: str | None) -> dict[str, Any]:
        return schedules_view.save_schedule(self, name, grid, token)

    def approval(self, name: str, approval_id: str, token: str) -> dict[str, Any]:
        return approval_page.approval(self, name, approval_id, token)

    def answer_approval(self, name: str, approval_id: str, token: str, approve: bool, by: str) -> dict[str, Any]:
        return approval_page.answer_approval(self, name, approval_id, token, approve, by)


__all__ = ["ACTIONS", "Dashboard", "NotFound", "Refused", "ref_for"]
