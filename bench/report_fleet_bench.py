"""``hyperpod-scheduler report`` at fleet scale (issue 30): 10, 100 and 1,000 clusters with stop/start
history (and the records the stops left), FSx discovery through the emulator (its own process) with 0 and
20 ms added to every AWS call.

    .venv/bin/python bench/report_fleet_bench.py [--runs 3] [--quick]

Each row is the console script run as a user runs it (median wall of ``--runs``, the sizes interleaved,
after one untimed run each), beside ``hyperpod-scheduler --version`` in the same run (start-up and
imports, which every command pays), and ``report --fsx-max-age 300`` (the refresh an earlier report
kept: the untimed run makes it; one cache folder per fleet size). In full mode (not ``--quick`` or
``--no-serial``) the FSx discovery is also timed in-process one cluster after another (concurrency 1:
how it was before issue 30) beside the shared refresh, at the same latency. Targets (issue 30): at
1,000 clusters ``report`` <= 3 s with 20 ms added per call, <= 1.5 s with none.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from emulator_bench import Http, _port  # noqa: E402
from hyperpod_scheduler.app import report as reports  # noqa: E402
from hyperpod_scheduler.aws.clients import AwsClients  # noqa: E402
from hyperpod_scheduler.cluster.storage import storage_members  # noqa: E402
from hyperpod_scheduler.config.model import Config  # noqa: E402
from hyperpod_scheduler.store import HistoryEntry, open_store  # noqa: E402
from hyperpod_scheduler.store.records import ClusterRecord, GroupSize, Snapshot  # noqa: E402
from tick_bench import CREDENTIALS, START, create_fleet, emulator_process, names  # noqa: E402

CLI = [str(Path(sys.executable).with_name("hyperpod-scheduler"))]
ACCOUNT = "123456789012"
TARGETS = {0: 1.5, 20: 3.0}  # seconds at 1,000 clusters, by added latency


def _store(path: Path, clusters: list[str], storage: dict[str, dict[str, Any]]) -> None:
    """A night per cluster: a stop at 19:00 and a start at 08:00 the next morning, and the record that
    stop left, as the scheduler writes it: its sizes and what FSx discovery reads of the DescribeCluster
    answer it was planned on (``Snapshot.storage``), so ``report`` describes no cluster (issue 30)."""
    with open_store(str(path)) as store:
        for name in clusters:
            key = f"{ACCOUNT}/us-east-1/{name}"
            stopped = START - timedelta(days=2, hours=-9)
            for at, action in ((stopped, "stop"), (stopped + timedelta(hours=13), "start")):
                store.append_history(HistoryEntry(key=key, at=at, action=action, actor="bench", outcome="settled"))
            snapshot = Snapshot(
                taken_at=stopped,
                sizes={"cpu": GroupSize(count=2, instance_type="ml.c5.xlarge")},
                transition_id=f"bench-{name}",
                reason="stop",
                storage=storage[name],
            )
            record = ClusterRecord.new(key, stopped).evolve(snapshot=snapshot, applied_state="running")
            store.put(record, 0)


def _storage(endpoint: str, clusters: list[str]) -> dict[str, dict[str, Any]]:
    """What each stop kept of its DescribeCluster answer (untimed: the scheduler's own looks made them)."""
    client = AwsClients(endpoint).client("sagemaker", None, "us-east-1")
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda n: client.describe_cluster(ClusterName=n), clusters))
    return {n: storage_members(a) for n, a in zip(clusters, answers, strict=True)}


def _wall(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-500:]}")
    return wall


def _discovery(endpoint: str, clusters: list[str], concurrency: int) -> float:
    """The FSx discovery alone, in-process, at ``concurrency`` (fresh clients: none is warm)."""
    aws = AwsClients(endpoint)
    finder = reports.FileSystemFinder(
        Config(), lambda region, profile: aws.client("sagemaker", None, region), aws, concurrency=concurrency
    )
    started = time.perf_counter()
    finder([f"{ACCOUNT}/us-east-1/{n}" for n in clusters], [])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="10 and 100 clusters, 1 run, no serial pass")
    parser.add_argument("--sizes", default=None, help="comma-separated cluster counts (10,100,1000)")
    parser.add_argument("--no-serial", action="store_true", help="skip the one-after-another reference")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else ([10, 100] if args.quick else [10, 100, 1000])
    runs = 1 if args.quick else args.runs
    serial = not (args.quick or args.no_serial)
    folder = Path(tempfile.mkdtemp(prefix="report-fleet-bench-"))
    config = folder / "hyperpod-scheduler.yaml"
    config.write_text("targets: []\n", encoding="utf-8")
    until = (START + timedelta(days=1)).isoformat()
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start (other work on the "
        f"machine too); emulator in its own process; {runs} run(s) each, interleaved, median wall"
    )
    print(
        "the store holds each cluster's record as its last stop left it, so `report` finds FSx mounts there "
        "(no DescribeCluster); the in-process columns describe every cluster (the reference: how it was)"
    )
    rows: list[tuple[int, int, float, float, float, float | None, float | None]] = []
    with emulator_process() as endpoint:
        create_fleet(endpoint, max(sizes))
        storage = _storage(endpoint, names(max(sizes)))
        stores = {}
        for n in sizes:
            stores[n] = folder / f"state-{n}.sqlite"
            _store(stores[n], names(n), storage)
        env = {
            # Byte-code cached in the bench's folder (PYTHONDONTWRITEBYTECODE dropped): an installed package
            # has its .pyc files; without them every run compiles every module (a second of start-up here).
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("AWS_", "HYPERPOD_SCHEDULER_")) and k != "PYTHONDONTWRITEBYTECODE"
            },
            **CREDENTIALS,
            "AWS_ENDPOINT_URL": endpoint,
            "HOME": str(folder),
            "PYTHONPYCACHEPREFIX": str(folder / "pycache"),
        }
        admin = Http(_port(endpoint))
        for latency in (0, 20):
            admin.admin("POST", "faults", {"latency_ms": latency})
            commands: dict[str, tuple[list[str], dict[str, str]]] = {"version": ([*CLI, "--version"], env)}
            for n in sizes:
                report = [*CLI, "report", "-c", str(config), "--state", str(stores[n]), "--until", until]
                commands[str(n)] = (report, env)
                # The untimed run keeps its refresh; the timed ones reuse it (a report run again within 5 min).
                own = {**env, "XDG_CACHE_HOME": str(folder / f"cache-{n}")}
                commands[f"{n} kept"] = ([*report, "--fsx-max-age", "300"], own)
            for command, where in commands.values():
                _wall(command, where)  # untimed: byte-code written, files in the page cache
            walls: dict[str, list[float]] = {k: [] for k in commands}
            for _ in range(runs):
                for key, (command, where) in commands.items():
                    walls[key].append(_wall(command, where))
            version = statistics.median(walls["version"])
            for n in sizes:
                before = _discovery(endpoint, names(n), 1) if serial else None
                after = _discovery(endpoint, names(n), reports.DISCOVERY_CONCURRENCY) if serial else None
                kept = statistics.median(walls[f"{n} kept"])
                rows.append((latency, n, statistics.median(walls[str(n)]), kept, version, before, after))
        admin.admin("POST", "faults", {"latency_ms": 0})
    print()
    print(
        "| added latency per AWS call | clusters | `report` (FSx found now) | `report --fsx-max-age 300` (kept "
        "refresh) | `--version` (reference) | FSx discovery in-process, one after another (before) | the same, "
        f"{reports.DISCOVERY_CONCURRENCY} at a time |"
    )
    print("|---|---|---|---|---|---|---|")
    for latency, n, wall, kept, version, before, after in rows:
        b = f"{before:.2f} s" if before is not None else "-"
        a = f"{after:.2f} s" if after is not None else "-"
        print(f"| {latency} ms | {n:,} | {wall:.2f} s | {kept:.2f} s | {version:.2f} s | {b} | {a} |")
    print()
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    for latency, target in TARGETS.items():
        got = [r for r in rows if r[0] == latency and r[1] == 1000]
        if not got:
            print(f"target (issue 30) report at 1,000 clusters, {latency} ms added <= {target:g} s: not measured")
            continue
        fresh, kept = got[0][2], got[0][3]
        print(
            f"target (issue 30) report at 1,000 clusters, {latency} ms added <= {target:g} s: FSx found now "
            f"{fresh:.2f} s, {'met' if fresh <= target else 'missed'}; with a kept refresh {kept:.2f} s, "
            f"{'met' if kept <= target else 'missed'}"
        )


if __name__ == "__main__":
    main()
