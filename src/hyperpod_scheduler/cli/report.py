"""``hyperpod-scheduler report``: what the schedule saved, and what kept billing while clusters were stopped.

The shell around ``cost``: read the history and records from the store, find each cluster's FSx
file systems through AWS, pick prices, then hand everything to the pure ``build_report``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import typer
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError
from rich.table import Table

from hyperpod_scheduler.aws.clients import RETRY_CONFIG, s3_client, sagemaker_client, session
from hyperpod_scheduler.cli.context import Context, make_context, parse_instant
from hyperpod_scheduler.cli.output import console, print_json
from hyperpod_scheduler.cost import fsx, pricelist, sources, summary
from hyperpod_scheduler.cost.fsx import FileSystem
from hyperpod_scheduler.cost.savings import Report, build_report
from hyperpod_scheduler.cost.settings import CostSettings
from hyperpod_scheduler.errors import UsageError

DEFAULT_WINDOW = timedelta(days=30)


def settings_from(ctx: Context) -> CostSettings:
    """The config's ``cost:`` section once the config model carries it; defaults until then."""
    raw = getattr(ctx.config, "cost", None)
    if raw is None or isinstance(raw, CostSettings):
        return raw or CostSettings()
    try:
        return CostSettings.model_validate(raw if isinstance(raw, dict) else raw.model_dump())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"config cost.{where}: {first['msg']}") from None


def _split_key(key: str) -> tuple[str | None, str]:
    parts = key.split("/")
    return (parts[1], parts[2]) if len(parts) == 3 else (None, parts[-1])


def _profile_for(ctx: Context, region: str | None) -> str | None:
    for target in ctx.config.targets:
        if target.region == region and target.profile:
            return target.profile
    return None


def discover_file_systems(
    ctx: Context, keys: list[str], settings: CostSettings, notes: list[str]
) -> dict[str, list[FileSystem]]:
    """Each key's FSx file systems; an AWS failure becomes a note and an unknown residual, not an abort."""
    out: dict[str, list[FileSystem]] = {}
    for key in keys:
        region, name = _split_key(key)
        configured = settings.fsx.file_systems.get(name, [])
        if not configured and not settings.fsx.discover:
            continue
        profile = _profile_for(ctx, region)
        try:
            fsx_client = session(profile, region).client("fsx", config=RETRY_CONFIG)
            cluster: dict[str, Any] | None = None
            s3 = None
            if settings.fsx.discover:
                try:
                    cluster = dict(sagemaker_client(profile=profile, region=region).describe_cluster(ClusterName=name))
                    s3 = s3_client(profile, region)
                except ClientError as exc:
                    notes.append(
                        f"{name}: no DescribeCluster answer ({exc.response['Error'].get('Code')}); "
                        "FSx found by config and tag only"
                    )
            out[key] = fsx.discover(
                name, fsx_client, configured=configured, s3=s3, cluster=cluster, by_tag=settings.fsx.discover
            )
        except (BotoCoreError, ClientError) as exc:
            notes.append(f"{name}: FSx discovery failed ({exc}); its FSx residual is not counted")
    return out


def make_report(
    ctx: Context, since_text: str | None, until_text: str | None, settings: CostSettings, with_fsx: bool
) -> Report:
    now = ctx.now()
    until = parse_instant(until_text, "--until") if until_text else now
    since = parse_instant(since_text, "--since") if since_text else until - DEFAULT_WINDOW
    if until <= since:
        raise UsageError(f"--until {until.isoformat()} must be after --since {since.isoformat()}")
    # From the beginning: a night that began before --since still counts from --since on.
    entries = ctx.store.history_all(None, until)
    keys = sorted({e.key for e in entries if e.action in ("stop", "start")})
    records = {k: ctx.store.get(k) for k in keys}
    notes: list[str] = []
    file_systems = discover_file_systems(ctx, keys, settings, notes) if with_fsx else {}
    if not with_fsx:
        notes.append("FSx discovery skipped (--no-fsx): the FSx residual is not counted")

    def pricing_client() -> Any:
        return session(None, pricelist.PRICING_REGION).client("pricing", config=RETRY_CONFIG)

    prices = sources.resolve(settings.prices, now, pricing_client, notes)
    return build_report(entries, records, file_systems, prices, since, until, notes)


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def print_table(report: Report) -> None:
    doc = summary.as_document(report)
    table = Table(
        title=f"savings {report.since:%Y-%m-%d %H:%M}Z .. {report.until:%Y-%m-%d %H:%M}Z (USD)",
        caption="net = instance cost avoided - FSx kept billing; protected groups were kept on purpose "
        "and are shown beside it, not subtracted",
    )
    for col in (
        "cluster",
        "period",
        "nights",
        "node-hours avoided",
        "instance cost avoided",
        "FSx kept billing",
        "protected, kept (not saved)",
        "net saving",
        "shortfall nodes",
    ):
        table.add_column(col, justify="left" if col in ("cluster", "period") else "right")
    rows = [(c["cluster"], c) for c in doc["clusters"]] + [("TOTAL", doc["total"])]
    for name, entry in rows:
        for period in summary.PERIODS:
            f = entry[period]
            table.add_row(
                name if period == "window" else "",
                period.replace("_", " "),
                str(entry["nights"]) if period == "window" else "",
                f"{f['avoided_node_hours']:,.1f}",
                _usd(f["avoided_cost"]),
                _usd(f["fsx_residual"]),
                _usd(f["protected_cost"]),
                _usd(f["net_saving"]),
                str(entry["shortfall_nodes"]) if period == "window" else "",
                end_section=period == summary.PERIODS[-1],
            )
    console.print(table)
    for c in doc["clusters"]:
        for fs in c["file_systems"]:
            console.print(
                f"{c['cluster']}: FSx {fs['id']} {fs['storage_gib']} GiB {fs['deployment_type']}"
                f"{'/' + str(fs['throughput_mbps_per_tib']) if fs['throughput_mbps_per_tib'] else ''}"
                f" (found by {fs['found_by']}): {_usd(c['fsx_per_month'])} a month, stopped or not",
                highlight=False,
            )
        for s in c["shortfalls"]:
            console.print(
                f"{c['cluster']}: start {s['at']} group '{s['group']}' {s['outcome']}: "
                f"{s['restored']} of {s['wanted']} nodes",
                highlight=False,
            )
        if c["unpriced"]:
            console.print(f"{c['cluster']}: no price for {', '.join(c['unpriced'])} (not counted)", highlight=False)
    for note in doc["notes"]:
        console.print(f"note: {note}", highlight=False)
    console.print("prices: " + "; ".join(doc["price_sources"]), highlight=False)


def register(app: typer.Typer) -> None:
    @app.command()
    def report(
        since: str | None = typer.Option(
            None, "--since", help="ISO start of the window (default: 30 days before --until)."
        ),
        until: str | None = typer.Option(None, "--until", help="ISO end of the window (default: now)."),
        as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
        csv_file: Path | None = typer.Option(None, "--csv", help="Write one CSV row per cluster and period to FILE."),
        html_file: Path | None = typer.Option(
            None, "--html", help="Write the dashboard's views as one self-contained HTML file to share."
        ),
        prices: Path | None = typer.Option(None, "--prices", help="A price override file (JSON/YAML); always wins."),
        price_source: str | None = typer.Option(
            None, "--price-source", help="'bundled' (no network) or 'api' (AWS Price List API, cached)."
        ),
        no_fsx: bool = typer.Option(False, "--no-fsx", help="Do not look up FSx file systems (no AWS calls)."),
        config: str | None = typer.Option(None, "--config", "-c", help="Config file."),
        state: str | None = typer.Option(
            None, "--state", help="State store: a SQLite path, sqlite:///path, dynamodb://TABLE?region=R, or memory:."
        ),
    ) -> None:
        """Per cluster and in total, per night and per month: instance hours avoided and their cost, the
        FSx cost that kept running, the cost of protected groups, the net saving and start shortfalls."""
        if as_json and csv_file:
            raise UsageError("--json and --csv: choose one output")
        if price_source not in (None, "bundled", "api"):
            raise UsageError(f"--price-source: {price_source!r} is not 'bundled' or 'api'")
        ctx = make_context(config, state, as_json)
        if html_file is not None:
            from hyperpod_scheduler.web import write_html_report

            written = write_html_report(ctx, html_file, since, until, file_systems={} if no_fsx else None)
            console.print(f"wrote {written}", highlight=False)
            return
        settings = settings_from(ctx)
        changes: dict[str, Any] = {}
        if prices is not None:
            changes["override"] = str(prices)
        if price_source is not None:
            changes["source"] = price_source
        if changes:
            settings = settings.model_copy(update={"prices": settings.prices.model_copy(update=changes)})
        result = make_report(ctx, since, until, settings, with_fsx=not no_fsx)
        if as_json:
            print_json(summary.as_document(result))
        elif csv_file is not None:
            try:
                summary.write_csv(result, csv_file)
            except OSError as exc:
                raise UsageError(f"--csv {str(csv_file)!r}: {exc.strerror or exc}") from None
            console.print(f"wrote {len(summary.csv_rows(result))} rows to {csv_file}", highlight=False)
        else:
            print_table(result)
