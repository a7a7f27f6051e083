"""`hyperpod-scheduler cluster ...`: validate, render, create and describe cluster specs.

A thin shell: parsing, rendering and the rules live in ``hyperpod_scheduler.cluster``; AWS calls go
through the standard client (point it at the emulator with ``AWS_ENDPOINT_URL_SAGEMAKER``).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import typer
import yaml
from rich import box
from rich.table import Table

from hyperpod_scheduler.aws.clients import default_region, s3_client, sagemaker_client
from hyperpod_scheduler.cli.options import profile_checked, region_checked
from hyperpod_scheduler.cli.output import SafeConsole, console, err_console, print_json
from hyperpod_scheduler.cluster.check import SpecReport
from hyperpod_scheduler.cluster.create import create_cluster
from hyperpod_scheduler.cluster.describe import request_from_describe, summarize_groups
from hyperpod_scheduler.cluster.legacy import FILE_NAME, provisioning_parameters
from hyperpod_scheduler.cluster.load import every_problem, load_report
from hyperpod_scheduler.cluster.render import spec_from_request
from hyperpod_scheduler.cluster.upload import Plan, entry_point_problems, plan
from hyperpod_scheduler.errors import Problem, SpecError, UsageError
from hyperpod_scheduler.inputs import args, files
from hyperpod_scheduler.inputs.text import shortened

app = typer.Typer(help="Cluster specs: validate, render, create, describe.", no_args_is_help=True)

EXAMPLES = ("slurm", "eks")

_SPEC = typer.Argument(..., help="The cluster spec (YAML).", show_default=False)
_JSON = typer.Option(False, "--json", help="Machine-readable output on stdout.")
_REGION = typer.Option(None, "--region", help="AWS region (default: the usual AWS chain).", callback=region_checked)
_PROFILE = typer.Option(None, "--profile", help="AWS profile (default: the usual AWS chain).", callback=profile_checked)


def _cluster_name(value: str) -> str:
    return args.cluster_name(value, "CLUSTER")


def _problem_json(report: SpecReport, i: int, p: Problem) -> dict[str, Any]:
    return {
        "severity": p.severity,
        "field": p.field,
        "api_field": report.api_fields.get(i, p.field),
        "group": p.group,
        "message": p.message,
    }


def _checked(path: Path) -> SpecReport:
    return load_report(path)


@app.command()
def validate(
    spec: Path = _SPEC,
    as_json: bool = _JSON,
    strict: bool = typer.Option(False, "--strict", help="Treat warnings as failures."),
) -> None:
    """Check a spec against the API model and HyperPod's rules; list every problem found.

    Exit 0 when valid, 2 when there are errors (or warnings with --strict).
    """
    report, structural = every_problem(spec)
    if report is None or structural:
        # The spec does not parse as written: still every problem found, one a line, then the verdict.
        problems = structural + (report.problems if report is not None else [])
        if as_json:
            shown = [
                {"severity": p.severity, "field": p.field, "group": p.group, "message": p.message} for p in problems
            ]
            print_json({"ok": False, "source": str(spec), "problems": shown})
        else:
            for p in problems:
                (err_console if p.severity == "error" else console).print(
                    str(p), markup=False, highlight=False, soft_wrap=True
                )
            errors = sum(1 for p in problems if p.severity == "error")
            console.print(
                f"{spec}: invalid: {errors} error(s), {len(problems) - errors} warning(s)",
                markup=False,
                highlight=False,
            )
        raise typer.Exit(2)
    failed = bool(report.errors) or (strict and bool(report.warnings))
    if as_json:
        print_json(
            {
                "ok": not failed,
                "source": str(spec),
                "cluster": report.spec.name,
                "tiers": {name: tier.value for name, tier in report.tiers().items()},
                "problems": [_problem_json(report, i, p) for i, p in enumerate(report.problems)],
                "request": report.request,
            }
        )
    else:
        for p in report.problems:
            (err_console if p.severity == "error" else console).print(
                str(p), markup=False, highlight=False, soft_wrap=True
            )
        groups = ", ".join(f"{n} ({t.value})" for n, t in report.tiers().items())
        n_err, n_warn = len(report.errors), len(report.warnings)
        verdict = "invalid" if report.errors else "valid"
        console.print(
            f"{spec}: {verdict}: cluster {report.spec.name!r}, groups {groups}; {n_err} error(s), {n_warn} warning(s)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if failed:
        raise typer.Exit(2)


@app.command()
def render(
    spec: Path = _SPEC,
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the request here, not stdout."),
    provisioning_parameters_path: Path | None = typer.Option(
        None,
        "--provisioning-parameters",
        help=f"Also write the legacy {FILE_NAME} (topology: provisioning-parameters) to this path.",
    ),
) -> None:
    """Print the CreateCluster request a spec renders to (JSON, as `aws sagemaker create-cluster
    --cli-input-json` takes it). Refuses a spec with errors; warnings go to stderr."""
    for option, target in (("--output", output), ("--provisioning-parameters", provisioning_parameters_path)):
        if target is not None:  # a folder, a device, a FIFO, a link or no folder: refused before anything
            files.writable_target(target, option)
    report = _checked(spec)
    report.raise_for_errors(str(spec))
    for p in report.warnings:
        err_console.print(str(p), markup=False)
    text = json.dumps(report.request, indent=2) + "\n"
    if provisioning_parameters_path is not None:
        doc = provisioning_parameters(report.spec)
        files.write_text(provisioning_parameters_path, json.dumps(doc, indent=2) + "\n", "--provisioning-parameters")
        err_console.print(f"wrote {provisioning_parameters_path}", markup=False)
    if output is None:
        print(text, end="")
    else:
        files.write_text(output, text, "--output")


@app.command()
def create(
    spec: Path = _SPEC,
    region: str | None = _REGION,
    profile: str | None = _PROFILE,
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and show the request; call nothing."),
    scripts: Path | None = typer.Option(
        None,
        "--upload-scripts",
        help="First upload this lifecycle-script folder to the spec's SourceS3Uri (entry points are checked; "
        "links out of the folder are refused; version-control folders and dotfiles are left out).",
    ),
    hidden: bool = typer.Option(
        False, "--upload-hidden", help="Upload dotfiles and dot-folders too (version-control folders never)."
    ),
    as_json: bool = _JSON,
) -> None:
    """Validate a spec and call CreateCluster with the request it renders to."""
    report = _checked(spec)
    report.raise_for_errors(str(spec))
    for p in report.warnings:
        err_console.print(str(p), markup=False)
    if dry_run:
        if scripts is not None:
            # What the real run checks before it uploads anything: the folder and every entry point.
            chosen = plan(scripts, hidden=hidden)
            problems = entry_point_problems(report.request, scripts, chosen)
            if problems:
                raise SpecError(problems, source=f"--upload-scripts {scripts}")
            _list_upload(chosen)
            err_console.print(f"--upload-scripts {scripts}: every entry point is there", markup=False)
        print_json(report.request)
        return
    region = region or default_region(profile)  # one region rule for every command (docs/scheduler.md)
    scripts_s3 = s3_client(profile=profile, region=region) if scripts else None
    arn = create_cluster(
        report,
        sagemaker_client(profile=profile, region=region),
        s3=scripts_s3,
        scripts=scripts,
        on_upload=lambda up: err_console.print(
            f"uploaded {len(up.keys)} file(s) to s3://{up.bucket}/{up.prefix}", markup=False
        ),
        hidden=hidden,
        on_plan=_list_upload,
    )
    name = report.request["ClusterName"]
    if as_json:
        print_json({"ClusterArn": arn, "ClusterName": name})
    else:
        console.print(f"creating cluster {name!r}: {arn}", markup=False, highlight=False, soft_wrap=True)


def _list_upload(chosen: Plan) -> None:
    """Say what the upload sends, and what it leaves out, before anything is sent."""
    err_console.print(f"--upload-scripts {chosen.root}: {len(chosen.files)} file(s) to upload:", markup=False)
    for name in chosen.files:
        err_console.print(f"  {name}", markup=False, highlight=False)
    if chosen.skipped:
        err_console.print(
            f"  left out (version control, dotfiles): {', '.join(chosen.skipped)}", markup=False, highlight=False
        )


@app.command()
def describe(
    name: str = typer.Argument(..., help="Cluster name or ARN.", show_default=False, callback=_cluster_name),
    region: str | None = _REGION,
    profile: str | None = _PROFILE,
    as_json: bool = _JSON,
    as_spec: bool = typer.Option(False, "--as-spec", help="Print the cluster as a spec (YAML)."),
) -> None:
    """Show a cluster's status and groups: sizes, lifecycle tier, Slurm role."""
    if as_json and as_spec:
        raise UsageError("--json and --as-spec are exclusive: pick one output")
    client = sagemaker_client(profile=profile, region=region or default_region(profile))
    response: dict[str, Any] = dict(client.describe_cluster(ClusterName=name))
    response.pop("ResponseMetadata", None)
    if as_json:
        print_json(response)
        return
    if as_spec:
        spec = spec_from_request(request_from_describe(response))
        data = spec.model_dump(mode="json", exclude_defaults=True)
        print(yaml.safe_dump(data, sort_keys=False), end="")
        return
    status = response.get("ClusterStatus", "?")
    console.print(f"{response.get('ClusterName', name)}: {status}", markup=False, highlight=False, soft_wrap=True)
    if response.get("FailureMessage"):
        failure = shortened(str(response["FailureMessage"]), 2000)
        console.print(f"failure: {failure}", markup=False, highlight=False, soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for title in ("group", "type", "current", "target", "min", "status", "tier", "slurm"):
        # Names are what people copy into the next command: never break them across lines.
        table.add_column(title, no_wrap=title in ("group", "type"))
    for g in summarize_groups(response):
        slurm = "-" if g.node_type is None else g.node_type + (f" ({g.partition})" if g.partition else "")
        table.add_row(
            g.name, g.instance_type, str(g.current), str(g.target),
            "-" if g.minimum is None else str(g.minimum), g.status, g.tier.value, slurm,
        )  # fmt: skip
    # Rich assumes 80 columns when piped; a file or pager can take the whole row.
    (console if console.is_terminal else SafeConsole(width=160)).print(table)


@app.command()
def example(
    kind: str = typer.Argument("slurm", help=f"Which example: {', '.join(EXAMPLES)}."),
) -> None:
    """Print an example spec to start from (each validates as is; replace the placeholder ARNs)."""
    if kind not in EXAMPLES:
        raise UsageError(f"unknown example {kind!r} (choose from {', '.join(EXAMPLES)})")
    text = resources.files("hyperpod_scheduler.cluster").joinpath(f"examples/{kind}.yaml").read_text("utf-8")
    print(text, end="")
