"""`hyperpod-scheduler agent ...`: the Slurm-side daemon on the controller, its installer, a local audit."""

from __future__ import annotations

import logging
import signal
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType

import typer
from pydantic import ValidationError

from hyperpod_scheduler.agent.channel import open_channel
from hyperpod_scheduler.agent.daemon import agent_name, serve, serve_once
from hyperpod_scheduler.agent.install import DEFAULT_PREFIX, install_script
from hyperpod_scheduler.agent.messages import Intent, NodeSelector
from hyperpod_scheduler.agent.settings import CheckpointSettings
from hyperpod_scheduler.agent.worker import SlurmSide
from hyperpod_scheduler.cli.output import console, print_json
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import bounded, files
from hyperpod_scheduler.inputs.text import quoted
from hyperpod_scheduler.slurm.commands import SubprocessSlurm

app = typer.Typer(help="The Slurm agent on the controller.", no_args_is_help=True)

_CHANNEL_HELP = "Where intents and verdicts meet: s3://bucket/prefix, sqlite:///path, or a state-store path."
_CLUSTER_HELP = "Answer intents of this cluster key only (repeatable; default: every cluster on the channel)."


@app.command()
def run(
    channel: str = typer.Option(..., "--channel", help=_CHANNEL_HELP),
    cluster: list[str] = typer.Option([], "--cluster", help=_CLUSTER_HELP),
    poll: float = typer.Option(5.0, "--poll", help="Seconds between channel polls."),
    once: bool = typer.Option(False, "--once", help="Answer what is waiting, then exit."),
    slurm_bin: str | None = typer.Option(None, "--slurm-bin", help="Directory of squeue/sinfo/scontrol/scancel."),
) -> None:
    """Run the agent: pick up stop/start intents, do the Slurm side, write verdicts back."""
    if not poll > 0:
        raise UsageError(f"--poll: {poll} must be more than 0")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    chan = open_channel(channel)
    side = SlurmSide(SubprocessSlurm(slurm_bin), name=agent_name())
    if once:
        for verdict in serve_once(chan, side, cluster):
            print_json(verdict.model_dump(mode="json"))
        return
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    serve(chan, side, cluster, poll_seconds=poll, stop=stop)


@app.command("install-script")
def install_script_cmd(
    channel: str = typer.Option(..., "--channel", help=_CHANNEL_HELP),
    cluster: str = typer.Option(..., "--cluster", help="The cluster key the agent answers for."),
    package: str | None = typer.Option(None, "--package", help="What pip installs (default: this version)."),
    prefix: str = typer.Option(DEFAULT_PREFIX, "--prefix", help="Where the agent's virtualenv goes."),
    poll: float = typer.Option(5.0, "--poll", help="Seconds between channel polls."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the script here instead of stdout."),
) -> None:
    """Print (or write) the OnInitComplete script that installs the agent as a systemd unit."""
    text = install_script(channel, cluster, package, prefix, poll)
    if output is None:
        print(text, end="")
        return
    files.write_text(output, text, "--output", mode=0o755)  # the mode of the new file, never chmod in place
    console.print(f"wrote {output}")


@app.command()
def audit(
    partition: list[str] = typer.Option([], "--partition", help="Audit jobs on this partition (repeatable)."),
    nodes: list[str] = typer.Option([], "--nodes", help="Audit jobs on these nodes, a hostlist (repeatable)."),
    settings_file: Path | None = typer.Option(None, "--settings", help="YAML file with checkpoint settings."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Audit, on the controller, the checkpoints of jobs on some nodes. Changes nothing in Slurm."""
    if not partition and not nodes:
        raise UsageError("audit: give --partition or --nodes")
    settings = _settings(settings_file)
    groups = {f"partition:{p}": NodeSelector(partition=p) for p in partition}
    if nodes:
        groups["nodes"] = NodeSelector(nodes=list(nodes))
    now = datetime.now(UTC)
    intent = Intent(
        id=uuid.uuid4().hex,
        cluster="local",
        action="stop",
        groups=groups,
        dry_run=True,
        settings=settings,
        posted_at=now,
        expires_at=now + timedelta(hours=1),
    )
    verdict = SlurmSide(SubprocessSlurm(), name=agent_name()).handle(intent)
    if as_json:
        print_json(verdict.model_dump(mode="json"))
        return
    for job in verdict.jobs:
        console.print(f"job {job.job_id} {job.name}: {job.verdict}: {job.reason}", markup=False)
    console.print(f"policy {settings.policy}: {verdict.decision}: {verdict.reason}", markup=False)


def _settings(path: Path | None) -> CheckpointSettings:
    if path is None:
        return CheckpointSettings()
    try:
        data = bounded.read_yaml(path) or {}
    except bounded.Unreadable as exc:
        raise UsageError(f"--settings: cannot read '{path}': {exc.problem}") from None
    except bounded.BadDocument as exc:
        raise UsageError(f"{path}: not valid YAML: {exc.where}{exc.problem}") from None
    try:
        return CheckpointSettings.model_validate(data.get("checkpoints", data) if isinstance(data, dict) else data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(map(str, err["loc"])) or "settings"
        raise UsageError(f"{path}: {where}: {err['msg']} (got {quoted(err.get('input'))})") from None
