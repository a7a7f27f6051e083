"""``plan``: what would happen, and when, touching nothing; with ``--describe``, which groups a stop
would keep and why."""

from __future__ import annotations

import contextlib
from typing import Any

import typer
from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.app.actions import nothing_text, stop_forecast, stop_view
from hyperpod_scheduler.app.outcomes import EXIT_FAILED
from hyperpod_scheduler.app.status import night_hours
from hyperpod_scheduler.app.wording import clock, iso_minute, usd
from hyperpod_scheduler.cli.context import Context, make_context, parse_instant
from hyperpod_scheduler.cli.governing import governed_clusters, instant_check, needs_config
from hyperpod_scheduler.cli.options import ConfigOpt, JsonOpt, StateOpt
from hyperpod_scheduler.cli.output import Column, Listing, emit, error_line, output_format, output_option
from hyperpod_scheduler.cost.savings import keep_cost_per_night
from hyperpod_scheduler.engine import image_update
from hyperpod_scheduler.engine.approvals import DEFAULT_APPROVAL_MINUTES
from hyperpod_scheduler.engine.fleet import Governed
from hyperpod_scheduler.engine.held import holds_in_force, through_holds
from hyperpod_scheduler.engine.plan_steps import HORIZON, as_mapping, plan
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.guards.approval import needs_approval
from hyperpod_scheduler.guards.capacity import head_warning
from hyperpod_scheduler.store.errors import CorruptRecordError
from hyperpod_scheduler.store.records import ClusterRecord


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan_cmd(
        until: str | None = typer.Option(
            None, "--until", help="Plan up to this ISO instant (default: 7 days).", callback=instant_check("--until")
        ),
        describe: bool = typer.Option(
            True, "--describe/--no-describe", help="Describe each cluster (read-only) to list protected groups."
        ),
        config: str | None = ConfigOpt,
        state: str | None = StateOpt,
        as_json: bool = JsonOpt,
        output: str | None = output_option(),
    ) -> None:
        """What would happen, and when, touching nothing."""
        fmt = output_format(output, as_json)
        needs_config(config, "plan")
        ctx = make_context(config, state, fmt in ("json", "yaml"))
        now = ctx.now()
        end = parse_instant(until, "--until") if until else now + HORIZON
        governed = governed_clusters(ctx, config, "plan")
        damaged: list[str] = []
        leads = {}
        for g in governed:
            if g.schedule.ready_by:
                with contextlib.suppress(CorruptRecordError):  # said below, once, with its hold
                    leads[g.ref.key] = ctx.lead_for(g)

        def record_of(key: str) -> ClusterRecord | None:
            try:
                return ctx.store.get(key)
            except CorruptRecordError as exc:  # one damaged record never hides the others' plans
                damaged.append(f"{exc}: its hold is not known, so its rows follow its schedule alone")
                return None

        holds = holds_in_force(record_of, governed, now)
        steps = through_holds(plan(governed, now, end, leads), governed, holds, end)
        # Two targets' clusters of one name are two rows: with several accounts (regions) each row says which.
        # Before a namesake's account is known, the profile that reaches it says which it is.
        places = [(g.ref.name, g.ref.region) for g in governed]
        accounts = len({g.ref.account for g in governed if g.ref.account}) > 1 or len(set(places)) < len(places)
        regions = len({g.ref.region for g in governed if g.ref.region}) > 1
        guarded = [_protection_rows(ctx, g) for g in governed] if describe else []
        zones = {(g.ref.name, g.ref.account, g.ref.region): g.schedule.timezone for g in governed}
        listing = Listing(
            [
                Column("when (UTC)", keep=True),
                Column("local"),
                Column("cluster", keep=True),
                *([Column("account", keep=True)] if accounts else []),
                *([Column("region")] if regions else []),
                Column("action", keep=True),
                Column("schedule", wide_only=True),
                Column("why"),
            ],
            [
                [
                    iso_minute(s.at),
                    clock(s.at, zones.get((s.cluster, s.account, s.region))),
                    s.cluster,
                    *([_whose(s.account, s.profile)] if accounts else []),
                    *([s.region or "-"] if regions else []),
                    s.action,
                    s.schedule,
                    s.why,
                ]
                for s in steps
            ],
            title=f"plan {iso_minute(now)} .. {iso_minute(end)}",
            empty="no transitions in this window",
            notes=[line for row in guarded for line in _protection_lines(row, accounts)],
        )
        emit(listing, fmt, {"steps": as_mapping(steps), "clusters": guarded})
        for line in damaged:
            error_line(line)
        if damaged or ctx.fleet().problems:  # the skipped were said by governed_clusters, before the plan
            raise typer.Exit(EXIT_FAILED)  # printed; a script sees it too, as `status` and `tick` do


def _protection_rows(ctx: Context, g: Governed) -> dict[str, Any]:
    """Which groups the schedule's stop would keep and why, read with DescribeCluster (nothing is
    changed): the planner's and the guards' answer (``app.actions.stop_forecast``), the one the
    dashboard's stop preview, "tonight" and "kept at stop" show."""
    row: dict[str, Any] = {
        "cluster": g.ref.name, "account": g.ref.account, "profile": g.ref.profile, "region": g.ref.region,
        "protected": [], "warnings": [],
    }  # fmt: skip
    try:
        described = ctx.engine().describe(g.ref)
    except (ClientError, BotoCoreError, HyperpodSchedulerError) as exc:
        row["error"] = str(exc)
        return row
    try:
        record = ctx.store.get(g.ref.key)
    except CorruptRecordError as exc:
        row["error"] = str(exc)
        return row
    view = stop_view(ctx, g.ref, described, record)  # the roles the stop uses (remembered, else the file)
    f = stop_forecast(ctx, g.ref, described, schedule=g.schedule)
    hours = night_hours(g.schedule, ctx.now())
    row["night_hours"] = hours
    row["stop"] = {"outcome": f.outcome, "reason": f.reason, "nothing": nothing_text(f)}
    if f.outcome == "busy":
        row["warnings"].append(f"changing now ({f.reason}): what its stop keeps is known once it settles")
    for k in f.kept if f.outcome != "busy" else ():
        # Every type the group may run: a flexible group is priced at its dearest, as an upper bound.
        types = k.instance_types or ((k.instance_type,) if k.instance_type else ())
        cost = keep_cost_per_night(types, k.after, g.schedule, ctx.now(), ctx.prices())
        row["protected"].append(
            {
                "group": k.group,
                "keep_at": k.after,
                "instance_type": k.instance_type,
                "instance_types": list(types),
                "reason": k.why,
                "kept_by": k.kept_by,
                "overridable": k.overridable,
                "keep_cost_per_night_usd": None if cost is None else round(cost.usd, 2),
                "price_is_upper_bound": cost is not None and cost.upper_bound,
            }
        )
    kept = {k.group for k in f.kept}
    warning = head_warning(view.groups, g.policy, kept)
    if warning:
        row["warnings"].append(warning)
    if f.outcome == "blocked":
        row["warnings"].append(f"the scheduled stop would be blocked: {f.reason}")
    # The evening's AMI forecast: the engine's one value, the dashboard shows the same (engine.image_update).
    asleep = {x.group for x in f.groups if x.after == 0} if f.outcome != "busy" else set()
    images = image_update.evening(ctx.engine(), g.ref, record, view, asleep)
    row.update(images.as_json())
    row["warnings"].extend(images.lines(g.ref.name))
    needing = needs_approval(view, g.policy)
    if needing:
        minutes = g.policy.approval_minutes or DEFAULT_APPROVAL_MINUTES
        row["warnings"].append(
            f"a scheduled stop releases {', '.join(needing)} only with a person's approval (asked {minutes:g} min "
            "before the stop; no answer keeps them)"
        )
    row["refused"] = f.reason if f.outcome == "refused" else None
    return row


def _whose(account: str | None, profile: str | None) -> str:
    """The account cell: the account, else (not known yet) the profile that reaches the cluster."""
    return account or (f"profile {profile}" if profile else "-")


def _protection_lines(row: dict[str, Any], accounts: bool = False) -> list[str]:
    """The notes under the plan; ``accounts``: the fleet spans several, so each names its cluster's."""
    lines = []
    whose = f"account {row['account']}" if row["account"] else f"profile {row['profile'] or '?'}"
    name = f"{row['cluster']} ({whose})" if accounts else row["cluster"]
    for p in row["protected"]:
        cost = p["keep_cost_per_night_usd"]
        about = "up to" if p["price_is_upper_bound"] else "about"
        priced = f" ({about} {usd(cost, cents=False)} per {row['night_hours']:.0f} h night)" if cost is not None else ""
        lines.append(f"{name} keeps {p['group']} at {p['keep_at']}{priced}: {p['reason']}")
    lines.extend(f"{name}: {w}" for w in row["warnings"])
    if row.get("error"):
        lines.append(f"{name}: cannot describe: {row['error']}")
    if row.get("refused"):
        lines.append(f"{name}: no stop or start will be sent: {row['refused']}")
    return lines
