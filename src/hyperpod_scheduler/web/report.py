"""The dashboard's views as one self-contained HTML file to share: inline CSS and SVG, no scripts,
no external fetches."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from hyperpod_scheduler import __version__
from hyperpod_scheduler.app import report as reports
from hyperpod_scheduler.app import wording
from hyperpod_scheduler.app.compose import Context
from hyperpod_scheduler.app.looks import Looks
from hyperpod_scheduler.cost.settings import CostSettings
from hyperpod_scheduler.inputs import files
from hyperpod_scheduler.store.errors import StoreError
from hyperpod_scheduler.web.places import Place
from hyperpod_scheduler.web.service import Dashboard

HERE = Path(__file__).parent


def render_report(
    dash: Dashboard,
    since: str | None = None,
    until: str | None = None,
    tz: str | None = None,
    names: tuple[str, str] = ("since", "until"),
) -> str:
    env = Environment(loader=FileSystemLoader(str(HERE / "templates")), autoescape=select_autoescape(["html"]))
    env.globals["hours"] = wording.hours
    fleet = dash.fleet_page()
    rows = fleet["rows"]
    values: dict[str, Any] = {
        "standalone": True,
        "read_only": True,
        "version": __version__,
        "Markup": Markup,
        "css": Markup((HERE / "static" / "style.css").read_text(encoding="utf-8")),
        "generated": dash.now().astimezone(UTC).isoformat(),
        "f": fleet,
        # Each row's own cluster: two accounts' clusters of one name are two sections, never a refusal.
        # A cluster whose record is damaged has no section (its Fleet row says so); the others do.
        "clusters": [c for r in rows if (c := _section(dash, r)) is not None],
        "s": dash.savings(since, until, names),
        "g": dash.schedules(tz),
        "saved": None,
        "actions": (),
    }
    return env.get_template("report.html").render(values)


def _place_of(row: dict[str, Any]) -> Place:
    """Where a fleet row's cluster is: its account and region, else (not known yet) its profile."""
    account = row.get("account")
    return Place(account, row.get("region"), None if account else row.get("profile"))


def write_html_report(
    ctx: Context,
    path: str | Path,
    since: str | None,
    until: str | None,
    *,
    with_fsx: bool = True,
    settings: CostSettings | None = None,
) -> Path:
    """Write the fleet, every cluster, the savings and the schedules to ``path`` as one HTML file.

    The savings are the same computation as ``report`` prints; ``with_fsx=False`` is ``--no-fsx``,
    ``settings`` the report's cost settings (``--prices``, ``--price-source``)."""
    dash = Dashboard(
        now=ctx.now,
        file_systems=None if with_fsx else reports.none_found,
        fixed_context=ctx,
        cost=settings,
        looks=Looks(cold_first=False),  # a file written once: every cluster read now, none shown from the store
    )
    html = render_report(dash, since, until, names=("--since", "--until"))  # the command line's own names
    return files.write_text(path, html, "--html")  # atomic; never over a device, a FIFO or a link


__all__ = ["datetime", "render_report", "write_html_report"]


def _section(dash: Dashboard, row: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return dash.cluster(row["cluster"], place=_place_of(row))
    except StoreError:
        return None
