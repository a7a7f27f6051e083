"""One time-zone setting for every page (issue 27 item 7).

The viewer picks a zone once (the header's form, or ``?tz=`` on any page); it is kept in a cookie and
every page shows its times in it: the Fleet page's next transitions, the cluster page's timeline,
tooltips and history, the schedules' second grid. Without a choice each page keeps its default (a
cluster's times in its schedule's zone, the schedules' second grid in UTC or the browser's zone).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from hyperpod_scheduler.app.wording import clock, countdown, when
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.web.grid import viewer_zone

COOKIE = "hps_tz"
MAX_AGE = 400 * 24 * 3600  # about as long as browsers keep a cookie


def chosen(query: str | None, cookie: str | None) -> ZoneInfo | None:
    """The zone asked for in the address (a bad one is the viewer's error: a one-line 400), else the
    one kept in the cookie (a bad cookie is ignored, never an error page), else None."""
    if query and query.strip():
        return viewer_zone(query)
    if cookie and cookie.strip():
        try:
            return viewer_zone(cookie)
        except UsageError:
            return None
    return None


def fleet_in(shown: dict[str, Any], zone: ZoneInfo | None) -> dict[str, Any]:
    """The Fleet page's context with its clock times in ``zone`` (unchanged without one)."""
    if zone is None:
        return shown
    now = datetime.fromisoformat(str(shown["as_of"]))
    for row in shown.get("rows", []):
        next_in(row, zone, now)
    for t in shown.get("summary", {}).get("transitions", []):
        t["local"] = clock(datetime.fromisoformat(str(t["at"])), zone)
    return shown


def next_in(row: dict[str, Any], zone: ZoneInfo | None, now: datetime) -> dict[str, Any]:
    """A Fleet row's or the cluster page's "next" text in ``zone`` (unchanged without one)."""
    nxt = row.get("next_transition")
    if zone is not None and isinstance(nxt, Mapping) and nxt.get("at"):
        at = datetime.fromisoformat(str(nxt["at"]))
        row["next_local"] = f"{clock(at, zone)} ({countdown(at - now)})"
    return row


def local_text(zone: ZoneInfo | None) -> Callable[[str], str] | None:
    """For the templates: an ISO instant as ``Tue 1 Dec 23:00 CET`` in the chosen zone, shown beside
    the UTC time; None without a choice (the templates then show UTC only, as before)."""
    if zone is None:
        return None
    return lambda iso: when(datetime.fromisoformat(iso), zone)


__all__ = ["COOKIE", "MAX_AGE", "chosen", "fleet_in", "local_text", "next_in"]
