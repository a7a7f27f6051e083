"""``status``: every cluster the config governs or the store remembers.

With nothing configured (no config file, and a store that cannot hold a record: its SQLite file does not
exist, or ``memory:``) the answer is "no clusters", known from where the two are without reading either:
that answer imports no engine, store, config model or botocore (issue 30: at most half of ``aws
--version``). Anything else is ``cli.status_full``'s, imported when it is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import typer

from hyperpod_scheduler.cli.options import ConfigOpt, JsonOpt, StateOpt
from hyperpod_scheduler.cli.output import Column, Listing, emit, output_format, output_option
from hyperpod_scheduler.config.paths import SCHEDULE_TAG


def register(app: typer.Typer) -> None:
    @app.command()
    def status(
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
        output: str | None = output_option(),
        watch: bool = typer.Option(False, "--watch", "-w", help="Redraw every --interval seconds until Ctrl-C."),
        interval: float = typer.Option(5.0, "--interval", min=0.1, help="Seconds between redraws with --watch."),
        at: str | None = typer.Option(
            None, "--at", help="Show the status as of this ISO instant instead of now.", callback=_checked_instant
        ),
    ) -> None:
        """Every cluster the config governs or the store remembers: state (and what still bills),
        schedule, next transition in the schedule's timezone, flags; -o wide adds sizes and outcomes."""
        fmt = output_format(output, as_json)
        if not watch and nothing_configured(config, state):
            emit(status_listing(_when(at), []), fmt, [])
            return
        from hyperpod_scheduler.cli import status_full  # the engine, the store, botocore: only for clusters to show

        status_full.show_status(config, state, fmt, watch, interval, at)


def _when(at: str | None) -> datetime:
    from hyperpod_scheduler.app.instants import parse_instant

    return parse_instant(at, "--at") if at else datetime.now(UTC)


def _checked_instant(value: str | None) -> str | None:
    """Checks --at as it is parsed, before any config is looked for."""
    if value:
        _when(value)
    return value


def nothing_configured(config: str | None, state: str | None) -> bool:
    """No config file, a store with no record for certain, and no setting in the environment: nothing
    can have a row. A HYPERPOD_SCHEDULER_* setting (a webhook URL, an AWS deadline, ...) takes the full
    path, which checks it: a bad one is refused there, never passed over by the quick answer."""
    import os

    from hyperpod_scheduler.config.paths import CONFIG_ENV, STATE_ENV, config_path, nothing_stored

    settings = [k for k in os.environ if k.startswith("HYPERPOD_SCHEDULER_") and k not in (CONFIG_ENV, STATE_ENV)]
    return not settings and config_path(config) is None and nothing_stored(state)


def status_listing(now: datetime, rows: Sequence[Sequence[str]], title: str | None = None) -> Listing:
    """The status table around its rows (each already in words): the columns, the title, and what an
    empty table says."""
    from hyperpod_scheduler.app.wording import iso_minute

    return Listing(
        [
            Column("cluster", keep=True),
            Column("state"),
            Column("schedule"),
            Column("next transition"),
            Column("attention"),
            Column("region", wide_only=True),
            Column("bills now", wide_only=True, right=True),
            Column("recorded sizes", wide_only=True),
            Column("protected", wide_only=True),
            Column("last outcome", wide_only=True),
        ],
        [list(r) for r in rows],
        title=title or f"hyperpod-scheduler status at {iso_minute(now)}: nothing recorded yet",
        # An empty table alone reads as "broken"; say what makes a cluster show up.
        empty=f"no clusters: none is named in the config or tagged {SCHEDULE_TAG}=<schedule> in a target "
        "with tag_selector: true, and the state store has none from a manual stop or start",
    )
