"""`hyperpod-scheduler deploy ...` (Lambda artefact, CloudFormation templates) and
`hyperpod-scheduler config ...` (the fleet config stored in the hub's table or in S3).

Two Typer apps: ``app`` (registered as ``deploy``) and ``config_app`` (registered as ``config``).
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import typer

from hyperpod_scheduler.cli.output import console, print_json
from hyperpod_scheduler.deploy import config_store, notify_check, package, templates, verify
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import bounded, files

LOCATION_ENV = "HYPERPOD_SCHEDULER_FLEET_CONFIG"
PAUSED_LINE = "scheduling paused: hub.paused is true, so no cluster is stopped or started anywhere until it is cleared"

app = typer.Typer(
    help="Run the scheduler on AWS Lambda: build the artefact, print the templates.", no_args_is_help=True
)
config_app = typer.Typer(help="The fleet config stored in the hub (DynamoDB item or S3 object).", no_args_is_help=True)

_LOCATION_HELP = f"dynamodb://TABLE[?region=R] or s3://BUCKET/KEY (default: ${LOCATION_ENV})."


@app.command("package")
def package_cmd(
    output: Path = typer.Option(Path("dist"), "--output-dir", "-o", help="Directory to write lambda-<hash>.zip to."),
    no_deps: bool = typer.Option(False, "--no-deps", help="Only this package (dependencies supplied by a layer)."),
    platform: str = typer.Option(package.DEFAULT_PLATFORM, help="pip --platform of the Lambda architecture."),
    python: str = typer.Option(package.DEFAULT_PYTHON, "--python-version", help="Python of the Lambda runtime."),
    no_bytecode: bool = typer.Option(False, "--no-bytecode", help="Leave out compiled bytecode (slower cold starts)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Build the Lambda zip (the package and its locked runtime dependencies), named by its content hash."""
    artefact = package.build(
        output, dependencies=not no_deps, platform=platform, python=python, bytecode=not no_bytecode
    )
    if as_json:
        print_json(
            {
                "path": str(artefact.path), "key": artefact.key, "sha256": artefact.sha256, "files": artefact.files,
                "bytes": artefact.size_bytes, "unzipped_bytes": artefact.unzipped_bytes,
                "code_sha256": verify.from_hex(artefact.sha256),
            }
        )  # fmt: skip
        return
    mib, unzipped = artefact.size_bytes / 2**20, artefact.unzipped_bytes / 1e6
    lines = [
        f"wrote {artefact.path} ({artefact.files} files, {mib:.1f} MiB; {unzipped:.0f} MB unzipped of Lambda's "
        f"{package.UNZIPPED_LIMIT / 1e6:.0f} MB)",
        f"upload: aws s3 cp {artefact.path} s3://<CodeBucket>/{artefact.key}",
        f"deploy: CodeKey={artefact.key} (hyperpod-scheduler deploy template hub -p CodeKey={artefact.key} ...)",
        f"check: hyperpod-scheduler deploy verify --stack-name <stack> {artefact.path}",
    ]
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)


@app.command("lock")
def lock_cmd(
    output: Path = typer.Option(
        Path(__file__).resolve().parents[1] / "deploy" / package.LOCK_FILE, "--output", "-o", help="Lock file to write."
    ),
    python: str = typer.Option(package.DEFAULT_PYTHON, "--python-version", help="Python of the Lambda runtime."),
) -> None:
    """Re-resolve the Lambda's runtime dependencies for its platforms and pin them with hashes (maintainers)."""
    files.writable_target(output, "--output")  # before the (slow) resolution
    text = package.make_lock(python=python)
    files.write_text(output, text, "--output")
    pins = package.parse_lock(text).pins
    console.print(f"wrote {output} ({len(pins)} packages)", markup=False, soft_wrap=True)


@app.command("template")
def template_cmd(
    name: str = typer.Argument(..., help="hub or spoke."),
    param: list[str] = typer.Option([], "--param", "-p", help="Key=Value: set a parameter's default (repeatable)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write to this file instead of stdout."),
) -> None:
    """Print (or write) a CloudFormation template, with parameter defaults filled in (the code key
    written into the functions)."""
    params = templates.parse_params(param)
    text = templates.render(name, params)
    if output is None:
        print(text, end="" if text.endswith("\n") else "\n")
        return
    files.write_text(output, text, "--output", make_folders=True)
    console.print(f"wrote {output}", markup=False, soft_wrap=True)
    rest = templates.overrides(params)
    if rest:
        # A default is read only when the stack is created: an update keeps each previous value.
        console.print(f"deploy with: --parameter-overrides {rest}", markup=False, soft_wrap=True)


@app.command("verify")
def verify_cmd(
    artefact: Path = typer.Argument(..., help="The lambda-<hash>.zip that was deployed."),
    stack: str = typer.Option(..., "--stack-name", help="The hub stack (functions <stack>-orchestrator, -worker)."),
    region: str | None = typer.Option(None, "--region", help="The hub's region (default: the AWS configuration's)."),
) -> None:
    """Check that the hub's functions run this artefact (after a deploy or an upgrade)."""
    expected = verify.zip_sha256(artefact)
    for f in verify.verify(config_store.boto3_client("lambda", region), stack, expected):
        console.print(f"{f.function}: runs {artefact.name} ({f.code_sha256}, since {f.last_modified})",
                      markup=False, soft_wrap=True)  # fmt: skip


def _location(location: str | None) -> config_store.Location:
    text = location or os.environ.get(LOCATION_ENV, "")
    if not text:
        raise UsageError(f"--location: not given and ${LOCATION_ENV} is not set ({_LOCATION_HELP})")
    return config_store.parse_location(text)


@config_app.command("push")
def push_cmd(
    file: Path = typer.Argument(..., help="Fleet config YAML (targets with account and region)."),
    location: str | None = typer.Option(None, "--location", "-l", help=_LOCATION_HELP),
    hub_stack: str | None = typer.Option(
        None, "--hub-stack", help="The hub stack: notifications.sns_topic_arn must be its AlarmTopicArn."
    ),
    region: str | None = typer.Option(None, "--region", help="The hub stack's region (with --hub-stack)."),
) -> None:
    """Validate a fleet config file and store it where the hub reads it."""
    where = _location(location)
    try:  # bounded, a regular file only, strict UTF-8 (the parser then refuses tags and aliases bombs)
        text = bounded.decode(bounded.read_bytes(file, str(file)), str(file))
    except bounded.Unreadable as exc:
        raise UsageError(f"{file}: cannot read: {exc.problem}") from None
    topic = (
        notify_check.hub_topic(config_store.boto3_client("cloudformation", region), hub_stack) if hub_stack else None
    )
    fleet = config_store.write_text(where, text, check=partial(notify_check.check_topic, topic))
    accounts = len({t.account for t in fleet.targets})
    console.print(
        f"pushed {file} to {where}: {len(fleet.targets)} target(s) in {accounts} account(s)",
        markup=False,
        soft_wrap=True,
    )
    if fleet.hub.paused:
        console.print(PAUSED_LINE, markup=False, soft_wrap=True)


@config_app.command("status")
def status_cmd(location: str | None = typer.Option(None, "--location", "-l", help=_LOCATION_HELP)) -> None:
    """The stored fleet config at a glance: its version, its targets, and whether the pause switch is on."""
    where = _location(location)
    fleet, version = config_store.load_versioned(where)
    accounts = len({t.account for t in fleet.targets})
    lines = [f"{where}: version {version}, {len(fleet.targets)} target(s) in {accounts} account(s)"]
    if fleet.hub.paused:
        lines.append(PAUSED_LINE)
    lines.append(_stack_pause_line(where, fleet.hub.paused))
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)


def _stack_pause_line(where: config_store.Location, by_config: bool) -> str:
    """What the table says of the stack's SchedulingActive (only the orchestrator sees it, and records it
    in the table); a config in S3 names no table, so it can only say the parameter may pause it."""
    from hyperpod_scheduler.deploy import pause_record

    if where.scheme != "dynamodb":
        return "the hub's SchedulingActive parameter may also pause it (recorded in the state table, not here)"
    recorded = pause_record.read(config_store.boto3_client("dynamodb", where.region), where.name)
    if recorded is not None and recorded.by_stack:
        return (
            f"scheduling paused: the stack parameter SchedulingActive=No (as the orchestrator recorded it since "
            f"{recorded.since:%Y-%m-%d %H:%M}Z)"
        )
    said = "scheduling: paused by hub.paused only" if by_config else "scheduling: active"
    if recorded is None:
        return f"{said} (the orchestrator has recorded no SchedulingActive=No)"
    return f"{said} (SchedulingActive=Yes as the orchestrator recorded it since {recorded.since:%Y-%m-%d %H:%M}Z)"


@config_app.command("pull")
def pull_cmd(
    location: str | None = typer.Option(None, "--location", "-l", help=_LOCATION_HELP),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write to this file instead of stdout."),
) -> None:
    """Print (or write) the fleet config the hub reads, exactly as it was pushed."""
    if output is not None:
        files.writable_target(output, "--output")
    text = config_store.read_text(_location(location))
    if output is None:
        print(text, end="" if text.endswith("\n") else "\n")
        return
    files.write_text(output, text, "--output")
    console.print(f"wrote {output}", markup=False, soft_wrap=True)
