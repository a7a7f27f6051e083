"""``hyperpod-scheduler report`` on the emulator: a week of the demo's history, FSx found through the
emulator's own S3 and FSx, the console script run as a user runs it.

    .venv/bin/python bench/report_bench.py [--runs 5] [--quick]

Reference, measured in the same run: ``hyperpod-scheduler --version`` (starting the interpreter and
importing the CLI, which every command pays). Also the report computation alone, in-process.
Target: the whole ``report`` command under a second (issue 13); the last line says whether it is met.

The commands run interleaved (a burst of load elsewhere hits them alike), after one untimed run each,
with byte-code cached in the bench's own folder: an installed package has its ``.pyc`` files, and an
editable install under ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module on every run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from hyperpod_scheduler.app import report as reports
from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.demo.run import run_demo
from hyperpod_scheduler.store import open_store

CLI = [str(Path(sys.executable).with_name("hyperpod-scheduler"))]  # the console script, as a user runs it


TARGET_S = 1.0


def _wall(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr[-500:]}")
    return wall


def _walls(commands: dict[str, list[str]], env: dict[str, str], runs: int) -> dict[str, list[float]]:
    for command in commands.values():
        _wall(command, env)  # untimed: byte-code written, files in the page cache
    out: dict[str, list[float]] = {key: [] for key in commands}
    for _ in range(runs):
        for key, command in commands.items():
            out[key].append(_wall(command, env))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 runs over 2 virtual days")
    args = parser.parse_args()
    runs, days = (2, 2.0) if args.quick else (args.runs, 7.0)
    folder = Path(tempfile.mkdtemp(prefix="report-bench-"))
    figures: dict[str, Any] = {}

    def measure(result: Any, emu: Any, config: Any, state_path: str) -> None:
        state = folder / "state.sqlite"
        with sqlite3.connect(state_path) as src, sqlite3.connect(state) as dst:
            src.backup(dst)
        config_file = folder / "hyperpod-scheduler.yaml"
        config_file.write_text(yaml.safe_dump(config.model_dump(mode="json", exclude_defaults=True)))
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "PYTHONDONTWRITEBYTECODE"},
            "PYTHONPYCACHEPREFIX": str(folder / "pycache"),
            "AWS_ENDPOINT_URL": emu.endpoint,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "HOME": str(folder),
            "XDG_CONFIG_HOME": str(folder / "config"),
        }
        command = [
            *CLI,
            "report",
            "-c",
            str(config_file),
            "--state",
            str(state),
            "--until",
            result.report.until.isoformat(),
        ]
        figures["load"] = os.getloadavg()[0]
        figures.update(
            _walls({"version": [*CLI, "--version"], "report": command, "report_json": [*command, "--json"]}, env, runs)
        )
        with open_store(str(state)) as store:
            started = time.perf_counter()
            aws = AwsClients(emu.endpoint)
            finder = reports.FileSystemFinder(
                config, lambda region, profile: aws.client("sagemaker", None, region), aws
            )
            done = reports.build(
                store,
                reports.prices(config.cost.prices, emu.clock.now(), aws),
                finder,
                result.report.since,
                result.report.until,
            )
            figures["inproc"] = time.perf_counter() - started
            figures["clusters"] = len(done.clusters)
            figures["nights"] = done.nights

    run_demo(days=days, on_finish=measure)
    shutil.rmtree(folder, ignore_errors=True)
    cores = os.cpu_count()
    history = f"{figures['clusters']} clusters, {figures['nights']} nights of history"
    print(
        f"machine: {cores} cores, load average {figures['load']:.2f} at start; {history}, {runs} runs each, "
        "interleaved, median wall, byte-code cached"
    )
    print("")
    print("| command | median wall | best | worst |")
    print("|---|---|---|---|")
    for label, key in (
        ("`hyperpod-scheduler --version` (reference: start-up and imports)", "version"),
        ("`hyperpod-scheduler report` on the emulator (table)", "report"),
        ("`hyperpod-scheduler report --json` on the emulator", "report_json"),
    ):
        values = figures[key]
        print(f"| {label} | {statistics.median(values):.2f} s | {min(values):.2f} s | {max(values):.2f} s |")
    extra = statistics.median(figures["report"]) - statistics.median(figures["version"])
    print("")
    print(
        f"report beyond start-up: {extra:.2f} s; the report computation in-process (FSx discovery through the "
        f"emulator included): {figures['inproc']:.3f} s"
    )
    worst = max(statistics.median(figures["report"]), statistics.median(figures["report_json"]))
    verdict = "met" if worst < TARGET_S else "missed"
    print(f"target: report < {TARGET_S:g} s: {verdict} (median {worst:.2f} s, the slower of table and --json)")


if __name__ == "__main__":
    main()
