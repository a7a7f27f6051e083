"""``hyperpod-scheduler report`` and ``prices update``: what the schedule saved, what kept billing
beside it, and where every price came from.

A thin face: the figures come from ``app.report.build`` (the same computation the dashboard and
``report --html`` show); this module only picks the options and prints.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from hyperpod_scheduler.app import report as reports
from hyperpod_scheduler.app.wording import hours, iso_minute, usd
from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.cli.context import Context, make_context, parse_instant
from hyperpod_scheduler.cli.output import (
    JSON_HELP,
    Column,
    Format,
    Listing,
    console,
    emit,
    output_format,
    output_option,
    warning_line,
)
from hyperpod_scheduler.config.paths import cache_folder
from hyperpod_scheduler.cost import pricelist, sources, summary
from hyperpod_scheduler.cost.savings import PERIODS, Report
from hyperpod_scheduler.cost.settings import CostSettings
from hyperpod_scheduler.engine.runner import ClusterRef
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import files

COLUMNS = (
    "cluster",
    "period",
    "nights",
    "node-hours avoided",
    "saving (instance cost avoided)",
    "FSx still billing while stopped",
    "kept (not saved)",
    "shortfall nodes",
)
CAPTION = (
    "saving = what the nodes the schedule turned off would have billed. FSx bills whether or not the cluster "
    "is stopped, and kept groups were kept on purpose: both are shown beside the saving, never subtracted."
    " Per night: the window over its nights. Per month: the saving (and FSx, kept) per stopped hour, times the"
    " stopped hours the cluster's schedule has in the 730 hours after the window (a cluster no schedule governs:"
    " the window's share of 730 hours), so the range picked does not change it."
)


def settings_from(ctx: Context) -> CostSettings:
    """The config's ``cost:`` section, typed."""
    return reports.cost_settings(ctx.config)


def file_system_finder(ctx: Context, aws: AwsClients | None = None, max_age: float = 0.0) -> reports.FileSystemFinder:
    """FSx discovery with this command's own SageMaker clients (so an injected emulator client is used).
    ``max_age`` > 0: a refresh an earlier ``report`` kept (for the same clusters, settings and endpoint)
    is used while younger than that, and the report says how old it is."""
    aws = aws or AwsClients()
    saved = reports.SavedRefresh(cache_folder() / FSX_CACHE_FILE, _identity(ctx, aws)) if max_age > 0 else None
    return reports.FileSystemFinder(
        ctx.config,
        lambda region, profile: ctx.client_for(ClusterRef("", "", region, profile)),
        aws,
        cache_s=max_age,
        saved=saved,
        described=reports.seen_by_stops(ctx.store),
    )


FSX_CACHE_FILE = "fsx-discovery.json"
# The access key id already names the account; a secret or a session token (new at every refresh of
# temporary credentials) would only throw the kept refresh away.
_SECRETS = frozenset({"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"})


def _identity(ctx: Context, aws: AwsClients) -> str:
    """What a discovery's answer depends on besides the cluster keys (see ``reports.SavedRefresh``): the
    FSx settings, the targets' profiles, the endpoint, and every AWS_ variable, since AWS_PROFILE, the
    default region, AWS_CONFIG_FILE or an access key choose which account and region a target without
    its own profile talks to. Kept as a digest, so the cache file never repeats an access key id."""
    aws_env = sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_") and k not in _SECRETS)
    targets = sorted({(str(t.region), str(t.profile)) for t in getattr(ctx.config, "targets", None) or []})
    fsx = reports.cost_settings(ctx.config).fsx.model_dump(mode="json")
    text = json.dumps([fsx, targets, aws_env, aws.endpoint_url], sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_report(
    ctx: Context,
    since_text: str | None,
    until_text: str | None,
    settings: CostSettings,
    with_fsx: bool,
    aws: AwsClients | None = None,
    fsx_max_age: float = 0.0,
) -> Report:
    since = parse_instant(since_text, "--since") if since_text else None
    until = parse_instant(until_text, "--until") if until_text else None
    notes: list[str] = []
    start, end = reports.window(ctx.now(), since, until, notes)
    table = reports.prices(settings.prices, ctx.now(), aws or AwsClients(), notes)
    finder = file_system_finder(ctx, aws, fsx_max_age) if with_fsx else reports.none_found
    return reports.build(ctx.store, table, finder, start, end, notes, ctx.config)


def report_listing(report: Report) -> Listing:
    """The report as rows: per cluster and in total, the window, a night and a month."""
    doc = summary.as_document(report)
    rows = []
    for name, entry in [(c["label"], c) for c in doc["clusters"]] + [("TOTAL", doc["total"])]:
        for period in PERIODS:
            f = entry[period]
            bound = bool(entry["price_is_upper_bound"])  # a flexible group priced at its dearest type
            rows.append(
                [
                    name,
                    period.replace("_", " "),
                    str(entry["nights"]) if period == "window" else "",
                    hours(f["avoided_node_hours"]),
                    usd(f["saving"], up_to=bound),
                    usd(f["fsx_while_stopped"]),
                    usd(f["kept_cost"], up_to=bound),
                    str(entry["shortfall_nodes"]) if period == "window" else "",
                ]
            )
    columns = [
        Column(c, keep=c in ("cluster", "period"), right=c not in ("cluster", "period"), wide_only=c == "nights")
        for c in COLUMNS
    ]
    title = f"savings {iso_minute(report.since)} .. {iso_minute(report.until)} (USD)"
    return Listing(columns, rows, title=title, notes=[CAPTION, *detail_lines(doc)])


def print_table(report: Report, fmt: Format = "table") -> None:
    emit(report_listing(report), fmt, summary.as_document(report))


def detail_lines(doc: dict[str, Any]) -> list[str]:
    """What the table cannot show, one line each: kept groups, file systems, shortfalls, notes, prices."""
    lines: list[str] = []
    for raw in doc["clusters"]:
        c = {**raw, "cluster": raw["label"]}
        kept = c["per_night"]["kept_cost"]
        if kept > 0:
            groups = sorted({g for n in c["stopped_intervals"] for g, v in n["groups"].items() if v["running"] > 0})
            lines.append(
                f"{c['cluster']}: kept {usd(kept, up_to=c['price_is_upper_bound'])} a night (not saved): "
                f"{', '.join(groups)} stayed up"
            )
        if c["price_is_upper_bound"]:
            lines.append(
                f"{c['cluster']}: {', '.join(c['upper_bound_groups'])} may run several instance types "
                "(flexible): priced at the dearest, so its figures are upper bounds"
            )
        for fs in c["file_systems"]:
            lines.append(
                f"{c['cluster']}: {fs['label']} {fs['id']}, {fs['storage_gib']:,} GiB (found by "
                f"{', '.join(fs['found_by'])}): bills whether or not the cluster is stopped"
            )
        if c["fsx_per_month"]:
            night, month = c["per_night"]["fsx_while_stopped"], c["per_month"]["fsx_while_stopped"]
            lines.append(
                f"{c['cluster']}: FSx bills {usd(c['fsx_per_month'])} a month in all; while stopped "
                f"{usd(night)} a night, {usd(month)} a month"
            )
        for s in c["shortfalls"]:
            lines.append(
                f"{c['cluster']}: start {s['at']} group '{s['group']}' {s['outcome']}: "
                f"{s['restored']} of {s['wanted']} nodes"
            )
        if c["unpriced"]:
            lines.append(f"{c['cluster']}: no price for {', '.join(c['unpriced'])} (not counted)")
    for r in doc.get("reserved_idle", []):
        paid = "" if r["cost"] is None else f" ({r['cost']:,.2f} {r['currency'] or 'USD'} of the plan's upfront fee)"
        lines.append(
            f"{r['cluster']}: training plan {r['plan']}: {r['idle_instance_hours']:,.1f} reserved instance-hours "
            f"paid and idle{paid}; reserved capacity bills whether or not it runs"
        )
    lines.extend(f"note: {note}" for note in doc["notes"])
    if doc["prices"]:
        by_source: dict[str, list[dict[str, Any]]] = {}
        for p in doc["prices"]:
            origin = (
                ("estimate: " if p["estimate"] else "") + p["source"] + (f", as of {p['as_of']}" if p["as_of"] else "")
            )
            by_source.setdefault(origin, []).append(p)
        for origin, used in by_source.items():
            lines.append(f"prices from {origin}:")
            for p in used:
                what, unit = p["item"].split(" ", 1)[1], p["unit"].removeprefix("USD ")
                lines.append(f"  {what}: ${p['usd']:,.4g} {unit}" + (f" ({p['note']})" if p["note"] else ""))
    else:
        lines.append("prices: " + "; ".join(doc["price_sources"]))
    return lines


def register(app: typer.Typer) -> None:
    @app.command()
    def report(
        since: str | None = typer.Option(
            None, "--since", help="ISO start of the window (default: 30 days before --until)."
        ),
        until: str | None = typer.Option(None, "--until", help="ISO end of the window (default: now)."),
        as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
        output: str | None = output_option(),
        csv_file: Path | None = typer.Option(None, "--csv", help="Write one CSV row per cluster and period to FILE."),
        html_file: Path | None = typer.Option(
            None, "--html", help="Write the dashboard's views as one self-contained HTML file to share."
        ),
        prices: Path | None = typer.Option(None, "--prices", help="A price override file (JSON/YAML); always wins."),
        price_source: str | None = typer.Option(
            None, "--price-source", help="'bundled' (no network) or 'api' (AWS Price List API, cached)."
        ),
        no_fsx: bool = typer.Option(False, "--no-fsx", help="Do not look up FSx file systems (no AWS calls)."),
        fsx_max_age: float = typer.Option(
            0.0,
            "--fsx-max-age",
            min=0.0,
            max=86400.0,
            help="Seconds an earlier report's FSx discovery may be reused (its age is shown); 0: found now.",
        ),
        config: str | None = typer.Option(None, "--config", "-c", help="Config file."),
        state: str | None = typer.Option(
            None, "--state", help="State store: a SQLite path, sqlite:///path, dynamodb://TABLE?region=R, or memory:."
        ),
    ) -> None:
        """Per cluster and in total, per night and per month: the saving (instance cost avoided), and beside
        it the FSx that kept billing and the groups kept running; start shortfalls; every price's source."""
        fmt = output_format(output, as_json)
        if (output or as_json) and (csv_file or html_file):
            raise UsageError(f"-o {fmt} and --{'csv' if csv_file else 'html'}: choose one output")
        if price_source not in (None, "bundled", "api"):
            raise UsageError(f"--price-source: {price_source!r} is not 'bundled' or 'api'")
        for option, target in (("--csv", csv_file), ("--html", html_file)):
            if target is not None:  # refused before the report is computed (a device, a FIFO, a link, no folder)
                files.writable_target(target, option)
        ctx = make_context(config, state, fmt in ("json", "yaml"))
        settings = settings_from(ctx)
        changes: dict[str, Any] = {}
        if prices is not None:
            changes["override"] = str(prices)
        if price_source is not None:
            changes["source"] = price_source
        if changes:
            settings = settings.model_copy(update={"prices": settings.prices.model_copy(update=changes)})
        if html_file is not None:
            from hyperpod_scheduler.web import write_html_report

            written = write_html_report(ctx, html_file, since, until, with_fsx=not no_fsx, settings=settings)
            console.print(f"wrote {written}", highlight=False)
            return
        result = make_report(ctx, since, until, settings, with_fsx=not no_fsx, fsx_max_age=fsx_max_age)
        if csv_file is not None:
            files.write_text(csv_file, summary.csv_text(result), "--csv")
            console.print(f"wrote {len(summary.csv_rows(result))} rows to {csv_file}", highlight=False)
        else:
            print_table(result, fmt)

    prices_app = typer.Typer(no_args_is_help=True, help="Prices the report uses: update from the AWS Price List API.")
    app.add_typer(prices_app, name="prices")

    @prices_app.command("update")
    def prices_update(
        region: str | None = typer.Option(
            None, "--region", help="Whose prices to fetch (default: cost.prices.region, else us-east-1)."
        ),
        file: Path | None = typer.Option(
            None,
            "--file",
            help="The override file to write (default: cost.prices.override, else "
            "~/.config/hyperpod-scheduler/prices.yaml, which the report reads when it exists).",
        ),
        overwrite: bool = typer.Option(
            False, "--overwrite", help="Replace your own rows too (by default rows with your own source are kept)."
        ),
        config: str | None = typer.Option(None, "--config", "-c", help="Config file."),
    ) -> None:
        """Fetch current SageMaker HyperPod and FSx for Lustre prices through the AWS Price List API
        (pricing:GetProducts) into the override file, each row with its source and date."""
        ctx = make_context(config, "memory:", False)
        settings = settings_from(ctx).prices
        target = file.expanduser() if file else sources.override_path(settings)
        where = region or settings.region
        left_out: list[str] = []
        fetched = pricelist.fetch(
            AwsClients().client("pricing", region=pricelist.PRICING_REGION), where, datetime.now(UTC), left_out
        )
        for note in left_out:
            warning_line(note)
        if not fetched.instance_hourly and not fetched.fsx_gb_month:
            raise UsageError(
                f"prices update: the Price List API returned no usable prices for {where}; {target} left as it was"
            )
        from hyperpod_scheduler.cost.price_file import update_file  # ruamel.yaml: only this command writes the file

        done = update_file(target, fetched, overwrite)
        counts = ", ".join(f"{n} {section}" for section, n in done.written.items())
        console.print(f"wrote {counts} rows from the AWS Price List API for {where} to {target}", highlight=False)
        if done.kept:
            console.print(
                f"kept {len(done.kept)} row(s) of your own (use --overwrite to replace them): {', '.join(done.kept)}",
                highlight=False,
            )
        if not settings.override and file and file.expanduser() != sources.default_override():
            console.print(
                f"note: the report reads {target} only with --prices {target} or cost.prices.override in the config",
                highlight=False,
            )
