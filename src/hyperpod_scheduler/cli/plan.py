"""``plan``: what would happen, and when, touching nothing; with ``--describe``, which groups a stop
would keep and why."""

from __future__ import annotations

from typing import Any

import typer
from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.app.status import night_hours
from hyperpod_scheduler.app.wording import clock, iso_minute, usd
from hyperpod_scheduler.cli.context import Context, make_context, parse_instant
from hyperpod_scheduler.cli.governing import governed_clusters, instant_check, needs_config
from hyperpod_scheduler.cli.options import ConfigOpt, JsonOpt, StateOpt
from hyperpod_scheduler.cli.output import Column, Listing, emit, output_format, output_option
from hyperpod_scheduler.cost.savings import keep_cost_per_night
from hyperpod_scheduler.engine import fidelity, image_update
from hyperpod_scheduler.engine.approvals import DEFAULT_APPROVAL_MINUTES
from hyperpod_scheduler.engine.fleet import HORIZON, Governed, as_mapping, plan
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.guards.approval import needs_approval
from hyperpod_scheduler.guards.capacity import head_warning, protections


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
        leads = {g.ref.key: ctx.lead_for(g) for g in governed if g.schedule.ready_by}
        steps = plan(governed, now, end, leads)
        guarded = [_protection_rows(ctx, g) for g in governed] if describe else []
        zones = {g.ref.name: g.schedule.timezone for g in governed}
        listing = Listing(
            [
                Column("when (UTC)", keep=True),
                Column("local"),
                Column("cluster", keep=True),
                Column("action", keep=True),
                Column("schedule", wide_only=True),
                Column("why"),
            ],
            [
                [iso_minute(s.at), clock(s.at, zones.get(s.cluster)), s.cluster, s.action, s.schedule, s.why]
                for s in steps
            ],
            title=f"plan {iso_minute(now)} .. {iso_minute(end)}",
            empty="no transitions in this window",
            notes=[line for row in guarded for line in _protection_lines(row)],
        )
        emit(listing, fmt, {"steps": as_mapping(steps), "clusters": guarded})


def _protection_rows(ctx: Context, g: Governed) -> dict[str, Any]:
    """Which groups a stop would keep and why, read with DescribeCluster (nothing is changed)."""
    row: dict[str, Any] = {"cluster": g.ref.name, "protected": [], "warnings": []}
    try:
        view = ctx.engine().describe(g.ref)
    except (ClientError, BotoCoreError, HyperpodSchedulerError) as exc:
        row["error"] = str(exc)
        return row
    from hyperpod_scheduler.engine.slurm_roles import remembered_roles

    view = remembered_roles(view, ctx.store.get(g.ref.key), ctx.now())  # roles learned from the file
    hours = night_hours(g.schedule, ctx.now())
    row["night_hours"] = hours
    row["protected"] = []
    for p in protections(view.groups, g.policy):
        itype = (view.group(p.group) or view.groups[0]).instance_type
        cost = keep_cost_per_night(itype, p.keep_at, hours, ctx.prices()) if itype and hours else None
        row["protected"].append(
            {
                "group": p.group,
                "keep_at": p.keep_at,
                "instance_type": itype,
                "reason": p.reason,
                "overridable": p.overridable,
                "keep_cost_per_night_usd": None if cost is None else round(cost, 2),
            }
        )
    warning = head_warning(view.groups, g.policy)
    if warning:
        row["warnings"].append(warning)
    # The evening's AMI forecast: the engine's one value, the dashboard shows the same (engine.image_update).
    images = image_update.evening(ctx.engine(), g.ref, ctx.store.get(g.ref.key), view)
    row.update(images.as_json())
    row["warnings"].extend(images.lines(g.ref.name))
    needing = needs_approval(view, g.policy)
    if needing:
        minutes = g.policy.approval_minutes or DEFAULT_APPROVAL_MINUTES
        row["warnings"].append(
            f"a scheduled stop releases {', '.join(needing)} only with a person's approval (asked {minutes:g} min "
            "before the stop; no answer keeps them)"
        )
    row["refused"] = fidelity.refusal(view, g.policy)
    return row


def _protection_lines(row: dict[str, Any]) -> list[str]:
    lines = []
    for p in row["protected"]:
        cost = p["keep_cost_per_night_usd"]
        priced = f" (about {usd(cost, cents=False)} per {row['night_hours']:.0f} h night)" if cost is not None else ""
        lines.append(f"{row['cluster']} keeps {p['group']} at {p['keep_at']}{priced}: {p['reason']}")
    lines.extend(f"{row['cluster']}: {w}" for w in row["warnings"])
    if row.get("error"):
        lines.append(f"{row['cluster']}: cannot describe: {row['error']}")
    if row.get("refused"):
        lines.append(f"{row['cluster']}: no stop or start will be sent: {row['refused']}")
    return lines
