"""`hyperpod-scheduler emulator ...` commands."""

from __future__ import annotations

import errno
import math
import shutil
import signal
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

import typer

from hyperpod_scheduler.emulator.slurm_bridge import DEFAULT_PIDFILE, LocalSlurmd, SlurmBridge, parse_pools
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import bounded, files
from hyperpod_scheduler.inputs.urls import loopback_host, loopback_url

app = typer.Typer(help="emulator commands.", no_args_is_help=True)


def _check_options(host: str, port: int, speed: float, allow_remote: bool) -> None:
    if not loopback_host(host) and not allow_remote:
        raise UsageError(
            f"--host {host} is not a loopback address; the emulator is an unauthenticated control plane, "
            "so pass --allow-remote to listen there anyway"
        )
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {port}")
    if not (speed > 0 and math.isfinite(speed)):
        raise UsageError(f"--speed must be a positive finite number, got {speed}")


def _slurm_bridges(values: list[str], pidfile: str) -> list[SlurmBridge]:
    try:
        pools = parse_pools(values)
    except ValueError as exc:
        raise UsageError(f"--slurm {exc}") from None
    if pools and shutil.which("slurmd") is None:
        raise UsageError(
            "--slurm: slurmd is not on PATH (install slurm-wlm; scripts/slurm-ci.sh sets up a loopback Slurm)"
        )
    if pools and "{name}" not in pidfile:
        raise UsageError(f"--slurmd-pidfile {pidfile!r}: must contain {{name}} (slurm.conf's %n)")
    daemons = LocalSlurmd(pidfile=pidfile)
    return [SlurmBridge(groups, daemons, cluster=cluster) for cluster, groups in pools.items()]


def _parse_start(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        start = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"--virtual-start: {value!r} is not an ISO 8601 time") from None
    return start if start.tzinfo is not None else start.replace(tzinfo=UTC)


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback only by default)."),
    port: int = typer.Option(0, "--port", help="Port to listen on; 0 picks a free one."),
    state: Path | None = typer.Option(None, "--state", help="SQLite file that keeps state across restarts."),
    capacity: Path | None = typer.Option(None, "--capacity", help="Capacity model YAML (default: built in)."),
    speed: float = typer.Option(1.0, "--speed", help="Emulated seconds per real second (600: 10 min in 1 s)."),
    virtual_start: str | None = typer.Option(
        None,
        "--virtual-start",
        help="Run on a virtual clock starting at this ISO 8601 time, moved only by POST /_emulator/clock.",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of every random choice (same seed, same run)."),
    throttle_rate: float = typer.Option(0.0, "--throttle-rate", help="Share of calls throttled (0-1)."),
    error_rate: float = typer.Option(0.0, "--error-rate", help="Share of calls failing with HTTP 500 (0-1)."),
    latency_ms: float = typer.Option(0.0, "--latency-ms", help="Latency added to every call, in ms."),
    allow_remote: bool = typer.Option(
        False, "--allow-remote", help="Allow a non-loopback --host (nothing is authenticated)."
    ),
    slurm: list[str] = typer.Option(
        [],
        "--slurm",
        help="CLUSTER/GROUP=NODE[,NODE...]: back that group's instances with these local Slurm nodes "
        "(slurmd -N NODE starts when an instance runs, stops when it is terminated). Repeatable.",
    ),
    slurmd_pidfile: str = typer.Option(
        DEFAULT_PIDFILE, "--slurmd-pidfile", help="Where slurm.conf's SlurmdPidFile puts a node's pid ({name})."
    ),
    omitted_members: str = typer.Option(
        "keep",
        "--omitted-members",
        envvar="HYPERPOD_EMULATOR_OMITTED_MEMBERS",
        help="What UpdateCluster does with an optional member an existing group leaves out: keep its value, "
        "or reset it to its default (the unconfirmed worst case on AWS, for rehearsal).",
    ),
    check_answers: bool = typer.Option(
        False,
        "--check-answers",
        envvar="HYPERPOD_EMULATOR_CHECK_ANSWERS",
        help="Check every answer against its botocore output shape (HTTP 500 if not).",
    ),
) -> None:
    """Serve the emulated SageMaker HyperPod API until SIGTERM or Ctrl-C; prints `endpoint: URL` when ready."""
    from hyperpod_scheduler.emulator import start_emulator
    from hyperpod_scheduler.emulator.protocol import Faults

    _check_options(host, port, speed, allow_remote)
    if omitted_members not in ("keep", "reset"):
        raise UsageError(f"--omitted-members must be keep or reset, got {omitted_members!r}")
    bridges = _slurm_bridges(slurm, slurmd_pidfile)
    start = _parse_start(virtual_start)
    if state is not None and not state.parent.is_dir():
        raise UsageError(f"--state {state}: the folder {state.parent} does not exist")
    if state is not None and (state.exists() or state.is_symlink()):
        files.check_input(state, "--state")  # SQLite would block on a FIFO, write into a device
    if capacity is not None:
        # The checked reader first (a regular file, bounded, no tags); the emulator then reads it itself.
        bounded.read_yaml(capacity, f"--capacity {capacity}")
    faults = Faults(throttle_rate=throttle_rate, error_rate=error_rate, latency_ms=latency_ms, seed=seed)
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # Handlers go in before the server starts, so a signal right after the endpoint line is not lost.
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        emulator = start_emulator(
            host=host,
            port=port,
            speed=None if start is not None else speed,
            virtual_start=start,
            capacity=capacity,
            seed=seed,
            state_path=state,
            faults=faults,
            omitted_members=omitted_members,
            check_answers=check_answers,
        )
    except OSError as exc:
        held = " (another program holds the port: pick another with --port N, or --port 0 for a free one)"
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}" + (held if exc.errno == errno.EADDRINUSE else "")
        ) from None
    for bridge in bridges:
        emulator.backend.add_listener(bridge)
    try:
        print(f"endpoint: {emulator.endpoint}", flush=True)
        if omitted_members == "reset":
            print(
                "omitted members: reset (an update's omitted optional members go back to their defaults)",
                file=sys.stderr,
                flush=True,
            )
        while not stop.wait(0.5):
            pass
    finally:
        emulator.close()
    print("emulator stopped", file=sys.stderr, flush=True)


@app.command()
def wait(
    endpoint: str | None = typer.Option(
        None, "--endpoint", help="The emulator's URL (default: $AWS_ENDPOINT_URL_SAGEMAKER, else $AWS_ENDPOINT_URL)."
    ),
    timeout: float = typer.Option(30.0, "--timeout", min=0.1, help="Seconds to wait before giving up."),
) -> None:
    """Wait until an emulator started in the background answers (for scripts: `serve ... &` then `wait`).

    Exit 0 once it answers, 1 if it does not within --timeout."""
    import os
    import time
    import urllib.error
    import urllib.request

    url = endpoint or os.environ.get("AWS_ENDPOINT_URL_SAGEMAKER") or os.environ.get("AWS_ENDPOINT_URL")
    if not url:
        raise UsageError("emulator wait: no --endpoint and no $AWS_ENDPOINT_URL to wait for")
    if not loopback_url(url, schemes=("http",)):  # the host compared as an address, never by its prefix
        raise UsageError(f"emulator wait: {url} is not a loopback http:// URL (the emulator listens on loopback)")
    health = url.rstrip("/") + "/_emulator/health"
    deadline = time.monotonic() + timeout
    while True:
        other = ""
        try:
            with urllib.request.urlopen(health, timeout=2) as answer:  # loopback only, checked above
                if _is_emulator(answer.read(65536)):
                    print(f"emulator ready: {url}")
                    return
                other = f"HTTP {answer.status} without the emulator's identity"
        except urllib.error.HTTPError as exc:
            other = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError):
            pass
        if other:
            # Something else holds the port: waiting would never end well, and going on would send the
            # scheduler's calls to a stranger.
            from hyperpod_scheduler.errors import HyperpodSchedulerError

            raise HyperpodSchedulerError(
                f"emulator wait: another program answers at {url} ({other}), not the hyperpod-scheduler "
                "emulator; serve the emulator on a free port (`emulator serve --port 0` prints the one it got) "
                "and point AWS_ENDPOINT_URL there"
            )
        if time.monotonic() > deadline:
            from hyperpod_scheduler.errors import HyperpodSchedulerError

            raise HyperpodSchedulerError(f"emulator wait: nothing answered at {url} within {timeout:g} s")
        time.sleep(0.2)


def _is_emulator(body: bytes) -> bool:
    """The health answer names the emulator (``service``); anything else on the port is not it."""
    import json

    from hyperpod_scheduler.emulator.server import IDENTITY

    try:
        data = json.loads(body)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("service") == IDENTITY
