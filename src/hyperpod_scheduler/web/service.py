"""What the dashboard shows and does, as plain dicts (the JSON API returns them; the pages render them).

The shell around the library: config, state store, clock and AWS clients come from a ``Dashboard``;
every figure comes from the same functions the CLI uses (fleet, schedule, cost, guards, engine).
This module only puts the pages together: the shared core is ``web.core``, and each page is plain
functions in its own module (``fleet_view``, ``tonight``, ``cluster_view``, ``manual``,
``schedules_view``, ``approval_page``, ``savings_view``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from datetime import datetime, tzinfo
from typing import Any

from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.engine.fleet import Governed, ref_for
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.web import approval_page, cluster_view, fleet_view, manual, savings_view, schedules_view
from hyperpod_scheduler.web import grid as grids
from hyperpod_scheduler.web.core import ACTIONS, DashboardCore, NotFound, Refused
from hyperpod_scheduler.web.fleet_query import FleetQuery
from hyperpod_scheduler.web.places import ANYWHERE, Place


class Dashboard(DashboardCore):
    """Everything the app needs; ``token`` None makes it read-only. Each page is its module's function."""

    _json_memo: tuple[list[dict[str, Any]], bytes] | None = None

    def fleet(
        self,
        month: dict[str, Any] | None = None,
        ctx: Context | None = None,
        found: Sequence[Governed] | None = None,
    ) -> list[dict[str, Any]]:
        if month is None and ctx is None and found is None:
            return [dict(r) for r in fleet_view.fleet_document(self)["rows"]]  # copies of the kept rows
        return fleet_view.fleet(self, month, ctx, found)

    def fleet_page(self, query: FleetQuery | None = None) -> dict[str, Any]:
        return fleet_view.fleet_page(self, query)

    def prewarm(self) -> None:
        """A refresh has ended: the rows built again now, in its thread, for the next viewer."""
        fleet_view.prewarm(self)

    def warm(self) -> None:
        """The dashboard starting: the fleet's first refresh begins now, beside the server, so a person
        seldom meets rows not read yet. A config or store that cannot be read is said by the first
        request, not here."""
        with contextlib.suppress(HyperpodSchedulerError, OSError, ValueError):
            self.looks.warm(self.context(), then=self.prewarm)

    def fleet_json(self, query: FleetQuery | None = None) -> tuple[bytes, int, int]:
        """``/api/fleet``: every row (no query), or the page of them ``query`` asks for, as JSON, with how
        many there are and how many match. Every row is written out once per kept reading."""
        rows = fleet_view.fleet_document(self)["rows"]
        if query is not None:
            chosen = query.select(rows)
            return json.dumps(chosen["rows"]).encode(), chosen["total"], chosen["matched"]
        held = self._json_memo
        if held is None or held[0] is not rows:  # the object itself, held: a new reading is a new list
            held = (rows, json.dumps(rows).encode())
            self._json_memo = held
        return held[1], len(rows), len(rows)

    def week(self, ctx: Context, rows: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
        return fleet_view.week(ctx, rows, now)

    def cluster(
        self, name: str, start_text: str | None = None, viewer: tzinfo | None = None, place: Place = ANYWHERE
    ) -> dict[str, Any]:
        return cluster_view.cluster(self, name, start_text, viewer, place)

    def preview(self, name: str, action: str, place: Place = ANYWHERE) -> dict[str, Any]:
        return manual.preview(self, name, action, place)

    def act(
        self,
        name: str,
        action: str,
        token: str | None,
        by: str = "",
        until: str | None = None,
        hold_state: str = "running",
        reason: str = "",
        place: Place = ANYWHERE,
    ) -> dict[str, Any]:
        try:
            return manual.act(self, name, action, token, by, until, hold_state, reason, place)
        finally:
            self.looks.changed()  # the Fleet page shows what the action did at once

    def savings(
        self, since_text: str | None = None, until_text: str | None = None, names: tuple[str, str] = ("since", "until")
    ) -> dict[str, Any]:
        return savings_view.savings(self, since_text, until_text, names)

    def schedules(self, tz: str | None) -> dict[str, Any]:
        return schedules_view.schedules(self, tz)

    def save_schedule(self, name: str, grid: grids.Grid, token: str | None) -> dict[str, Any]:
        try:
            return schedules_view.save_schedule(self, name, grid, token)
        finally:
            self.looks.changed()

    def approval(self, name: str, approval_id: str, token: str, place: Place = ANYWHERE) -> dict[str, Any]:
        return approval_page.approval(self, name, approval_id, token, place)

    def answer_approval(
        self, name: str, approval_id: str, token: str, approve: bool, by: str, place: Place = ANYWHERE
    ) -> dict[str, Any]:
        try:
            return approval_page.answer_approval(self, name, approval_id, token, approve, by, place)
        finally:
            self.looks.changed()


__all__ = ["ACTIONS", "Dashboard", "NotFound", "Refused", "ref_for"]
