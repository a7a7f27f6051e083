"""Start-up of a cron-style invocation: `--help` and `schedule check` beside `aws --version`, same run.

    .venv/bin/python bench/startup_bench.py [--runs 9] [--quick]

A cron `tick` or `schedule check` is a new process each time, so its start-up is its cost; `status`
runs where nothing is configured (no config file, no state store: a folder of its own), the first thing
a new user types. Each
command runs ``--runs`` times, the commands interleaved (so a burst of load elsewhere hits them alike);
each figure is the median wall time of the whole process, from spawn to exit: interpreter start-up,
imports, the command and the interpreter's exit. The reference is the AWS CLI v1 found on PATH
(``aws``); a run without one says so and prints no ratio. ``python -c pass`` is the interpreter's own
floor; the libraries' floor is Typer with the pydantic modules its parameter coercion imports (every
command with a value to parse pays it; ``--help`` does not). The last lines say, per command, whether
issue 16's target is met.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = Path(sys.executable).with_name("hyperpod-scheduler")
EXPR = "Mon-Fri 08:00-18:00 UTC"


TARGET = 0.5  # issues 16 and 30: each command at most half of `aws --version`, the same run
HELP = "hyperpod-scheduler --help"
CHECK = f"hyperpod-scheduler schedule check '{EXPR}'"
STATUS = "hyperpod-scheduler status, nothing configured"
TARGETED = {HELP: "issue 16", CHECK: "issue 16", STATUS: "issue 30"}
# What Typer imports to coerce a parameter's value (its adapters build pydantic TypeAdapters), and the
# console script's exit (a frozen heap, cli/main.py).
LIBRARIES = (
    "import gc, typer; from pydantic import AfterValidator, BeforeValidator, Field, TypeAdapter, ValidationInfo; "
    "TypeAdapter(str); gc.freeze()"
)


def timed(cmd: list[str], cwd: str | None = None, env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, cwd=cwd, env=env)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return wall


def compile_package() -> str:
    """Bytecode for this project's modules, as ``pip install`` leaves it (the AWS CLI's is there too).

    An editable install under ``PYTHONDONTWRITEBYTECODE=1`` (set in some shells and CI images) never
    writes any, so every start would compile each of our modules from source: a cost no installed copy
    pays, and one the reference does not pay either.
    """
    spec = importlib.util.find_spec("hyperpod_scheduler")
    if spec is None or not spec.submodule_search_locations:
        return "bytecode: hyperpod_scheduler not found, left as it is"
    package = next(iter(spec.submodule_search_locations))
    compiled = compileall.compile_dir(package, quiet=1)
    return f"bytecode: {package} compiled beforehand{'' if compiled else ' (some modules failed to compile)'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="3 runs each")
    args = parser.parse_args()
    runs = 3 if args.quick else args.runs
    aws = shutil.which("aws")
    env_note = ""
    commands: dict[str, list[str]] = {
        "python -c pass (the interpreter)": [sys.executable, "-c", "pass"],
        "python -c 'import typer + its pydantic' (the libraries' floor)": [sys.executable, "-c", LIBRARIES],
        HELP: [str(SCRIPT), "--help"],
        CHECK: [
            str(SCRIPT),
            "schedule",
            "check",
            EXPR,
            "--at",
            "2026-11-30T09:00",
        ],
    }
    # `status` where nothing is configured: no config file in its folder, no state store at the default
    # place (a folder of its own as $XDG_STATE_HOME), no HYPERPOD_SCHEDULER_* variables.
    empty = tempfile.mkdtemp(prefix="startup-bench-")
    bare = {k: v for k, v in os.environ.items() if not k.startswith("HYPERPOD_SCHEDULER_")}
    bare["XDG_STATE_HOME"] = os.path.join(empty, "state")
    if bare.get("PYTHONPATH"):  # run from another folder: a relative entry (PYTHONPATH=src) must still hold
        bare["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in bare["PYTHONPATH"].split(os.pathsep))
    commands[STATUS] = [str(SCRIPT), "status"]
    places: dict[str, tuple[str | None, dict[str, str] | None]] = {STATUS: (empty, bare)}
    if aws is not None:
        # The real interpreter behind a pyenv shim: the shim's own start-up is not the AWS CLI's.
        real = subprocess.run(["pyenv", "which", "aws"], capture_output=True, text=True, check=False).stdout.strip()
        aws = real or aws
        version = subprocess.run([aws, "--version"], capture_output=True, text=True, check=False)
        env_note = (version.stdout or version.stderr).strip().split()[0]
        commands["aws --version (reference)"] = [aws, "--version"]
    print(
        f"machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; "
        f"load average {os.getloadavg()[0]:.2f} at start; {runs} runs each, interleaved, median wall; "
        f"reference: {env_note or 'no aws on PATH'}"
    )
    print(compile_package())
    walls: dict[str, list[float]] = {label: [] for label in commands}
    for label, cmd in commands.items():
        timed(cmd, *places.get(label, (None, None)))  # warm the page cache and .pyc files: warm starts only
    for _ in range(runs):
        for label, cmd in commands.items():
            walls[label].append(timed(cmd, *places.get(label, (None, None))))
    if os.path.exists(bare["XDG_STATE_HOME"]):
        raise SystemExit("status with nothing configured created a state store: it is not the quick answer")
    shutil.rmtree(empty, ignore_errors=True)
    reference = statistics.median(walls["aws --version (reference)"]) if aws else None
    print()
    print("| command | median wall | min | vs aws --version |")
    print("|---|---|---|---|")
    for label, values in walls.items():
        median = statistics.median(values)
        ratio = f"{median / reference:.2f}x" if reference else "-"
        print(f"| {label} | {1000 * median:.0f} ms | {1000 * min(values):.0f} ms | {ratio} |")
    print()
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    for label, issue in TARGETED.items():
        median = statistics.median(walls[label])
        if reference is None:
            print(f"target ({issue}) {label} <= {TARGET}x aws --version: not judged (no aws on PATH)")
            continue
        verdict = "met" if median <= TARGET * reference else "missed"
        print(f"target ({issue}) {label} <= {TARGET}x aws --version: {median / reference:.2f}x, {verdict}")


if __name__ == "__main__":
    main()
