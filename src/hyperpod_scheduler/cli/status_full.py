"""``status`` beyond "nothing configured" (``cli.status`` answers that without this module): the rows
from the store in words, once or redrawn (``--watch``)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import typer
from rich.live import Live

from hyperpod_scheduler.app.outcomes import EXIT_FAILED
from hyperpod_scheduler.app.status import KeptGroup, StatusRow, fleet_status, state_text
from hyperpod_scheduler.app.wording import clock, countdown, iso_minute, usd
from hyperpod_scheduler.cli.context import Context, make_context
from hyperpod_scheduler.cli.output import Format, Listing, console, emit, error_line, is_terminal, rich_table
from hyperpod_scheduler.cli.status import status_listing
from hyperpod_scheduler.engine import fidelity


def _status_listing(ctx: Context, rows: list[StatusRow]) -> Listing:
    now = ctx.now()
    # Two accounts' clusters of one name are two rows: with several accounts each row names its own;
    # before a namesake's account is known, the profile that reaches it.
    places = [(r.cluster, r.region) for r in rows]
    accounts = len({r.account for r in rows if r.account}) > 1 or len(set(places)) < len(places)
    regions = len({r.region for r in rows if r.region}) > 1
    out = []
    for r in rows:
        nxt = r.next_transition
        zone = _zone(r.timezone)
        upcoming = f"{nxt[1]} {clock(nxt[0], zone)} ({countdown(nxt[0] - now)})" if nxt else "-"
        out.append(
            [
                r.cluster,
                *([r.account or (f"profile {r.profile}" if r.profile else "-")] if accounts else []),
                state_text(r),
                r.schedule,
                upcoming,
                "; ".join(f.text for f in r.flags if f.kind != "kept") or "-",
                r.region or "-",
                "-" if r.usd_per_hour is None else f"{usd(r.usd_per_hour)}/h",
                ", ".join(f"{n}={c}" for n, c in r.recorded_sizes.items()) or "-",
                ", ".join(_kept_text(p) for p in r.protected) or "-",
                _outcome_text(r),
            ]
        )
    return status_listing(now, out, title=_status_title(now, rows), accounts=accounts, regions=regions)


def show_status(
    config: str | None, state: str | None, fmt: Format, watch: bool, interval: float, at: str | None = None
) -> None:
    """``status`` beyond "nothing configured" (cli.status answers that without this module)."""
    ctx = make_context(config, state, fmt in ("json", "yaml"), at)
    if ctx.paused is not None and fmt in ("table", "wide"):  # json/yaml: stays one document
        console.print(ctx.paused.line(), style="bold yellow", markup=False, highlight=False)
    if not watch:
        rows = _print_status(ctx, fmt)
        skipped = ctx.fleet().problems if ctx.config.targets else []
        for problem in skipped:  # a target that could not be read, a cluster left out: said, as tick says it
            error_line(str(problem))
        if skipped or any(r.aws_unreachable or r.damaged for r in rows):
            # Printed, and marked stale (or damaged, or left out): a script or a monitor running `status`
            # must see it too (exit 1, as a tick whose reads failed exits).
            raise typer.Exit(EXIT_FAILED)
        return
    _watch_status(ctx, fmt, interval)


def _status_title(now: datetime, rows: list[StatusRow]) -> str:
    """Status reads the state store, not AWS: say how old the oldest record is rather than "as of now"
    (a cluster whose ticks failed, AWS unreachable, would otherwise read as live)."""
    dated = [r.recorded_at for r in rows if r.recorded_at is not None]
    if not dated:
        return f"hyperpod-scheduler status at {iso_minute(now)}: nothing recorded yet"
    oldest = min(dated)
    age = countdown(oldest - now)  # "5 min ago", or "now"
    return (
        f"hyperpod-scheduler status at {iso_minute(now)}: states as last recorded (oldest {iso_minute(oldest)}, {age})"
    )


def _print_status(ctx: Context, fmt: Format) -> list[StatusRow]:
    rows = fleet_status(ctx)
    emit(_status_listing(ctx, rows), fmt, [r.document() for r in rows])
    return rows


def _watch_status(ctx: Context, fmt: Format, interval: float) -> None:
    """Redraw until Ctrl-C (which ends a watch normally: exit 0). A pipe gets one table per interval."""
    try:
        if is_terminal() and fmt in ("table", "wide"):
            with Live(console=console, refresh_per_second=2, screen=False) as live:
                while True:
                    live.update(rich_table(_status_listing(ctx, fleet_status(ctx)), fmt))
                    time.sleep(interval)
        while True:
            _print_status(ctx, fmt)
            print(flush=True)
            time.sleep(interval)
    except KeyboardInterrupt:
        return


def _zone(name: str | None) -> Any:
    from hyperpod_scheduler.schedule.clock import zone  # the one zone rule: never an OSError for a folder

    return zone(name) if name else None


def _kept_text(p: KeptGroup) -> str:
    cost = p.keep_cost_per_night_usd
    return f"{p.group}={p.kept}" + (f" ({usd(cost, cents=False, up_to=p.price_is_upper_bound)}/night)" if cost else "")


def _outcome_text(r: StatusRow) -> str:
    groups = ", ".join(f"{o.group} {o.outcome} {o.current}/{o.target}" for o in r.last_outcomes)
    attention = [f"{r.refused.action} refused: {r.refused.reason}"] if r.refused else []
    attention.extend(fidelity.describe_changes([c]) for c in r.ami_changes)
    return "; ".join([groups, *attention]).strip("; ") or "-"
