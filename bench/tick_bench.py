"""Fleet tick against the emulator in its own process, beside the boto3 floor measured in the same run.

    .venv/bin/python bench/tick_bench.py [--clusters 1000] [--quick] [--store sqlite|memory]

Three kinds of figure, each from its own fresh process so that none distorts another:

- **floor**: one DescribeCluster + one UpdateCluster per cluster through one default boto3 client, with
  the tick's concurrency, against a trivial local server (its own process) that replays the emulator's
  own answers for these clusters. It is what any tool calling these two APIs through boto3 pays.
  Beside it, the same two calls through the tick's own client (what the client adds, apart from what
  the engine does).
- **time pass**: the ticks as production runs them (``app.compose`` clients: adaptive retries, the
  answer check, no blind retries of mutating calls; the state store given by ``--store``), untraced.
  Wall time per tick; peak RSS of the whole tick process after it (``getrusage``, free to read).
- **memory pass**: the same ticks in another process with ``tracemalloc`` on (its figures are the
  Python heap's peak during each tick; the pass is not timed, as tracing makes it 3-5x slower).

Clusters are created through HTTP before any pass (creation is not what is measured).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROLE = "arn:aws:iam::123456789012:role/bench"
START = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)  # Sunday: the office schedule wants every cluster stopped
MONDAY = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
SCHEDULE = "Mon-Fri 08:00-18:00 UTC"
TICKS = (
    ("everything due (first sight: stop)", 0),
    ("following the stops to settled", 3600),
    ("nothing due", 600),
    ("everything due (Monday 08:00: start)", None),  # None: to MONDAY
)
RECORDED = "bench-00000"  # the cluster whose answers the replay server gives, renamed for each request
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}


def names(n: int) -> list[str]:
    return [f"bench-{i:05d}" for i in range(n)]


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# --- the emulator in its own process -----------------------------------------------------------------


@contextmanager
def emulator_process() -> Iterator[str]:
    sys.path.insert(0, str(HERE))
    from emulator_bench import emulator

    with emulator("--virtual-start", START.isoformat(), "--seed", "1") as endpoint:
        yield endpoint


def create_fleet(endpoint: str, n: int, threads: int = 8) -> None:
    from emulator_bench import Http, _port
    from hyperpod_scheduler.cluster.samples import slurm_request

    port = _port(endpoint)

    def create(chunk: list[str]) -> None:
        client = Http(port)
        for name in chunk:
            body = json.dumps(slurm_request(name, {"cpu": ("ml.c5.xlarge", 2)}, role=ROLE)).encode()
            status, raw = client.call("CreateCluster", body)
            if status != 200:
                raise SystemExit(f"CreateCluster {name}: HTTP {status}: {raw[:200]!r}")

    all_names = names(n)
    create(["warm-up"])  # outside the timed fleet: what ``warm_up`` sends its two calls to
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, [all_names[i::threads] for i in range(threads)]))
    Http(port).admin("POST", "clock", {"advance_seconds": 3600})


def raw_answers(endpoint: str) -> dict[str, bytes]:
    """The emulator's own answers for one of the bench clusters, for the floor's server to replay."""
    from emulator_bench import Http, _port

    client = Http(_port(endpoint))
    status, describe = client.call("DescribeCluster", json.dumps({"ClusterName": RECORDED}).encode())
    if status != 200:
        raise SystemExit(f"DescribeCluster: HTTP {status}")
    arn = json.loads(describe)["ClusterArn"]
    return {"DescribeCluster": describe, "UpdateCluster": json.dumps({"ClusterArn": arn}).encode()}


# --- the floor -------------------------------------------------------------------------------------


def serve_replay(answers_file: str) -> None:
    """The trivial server: every SageMaker call answered with the recorded body, keep-alive."""
    answers = {k: v.encode() for k, v in json.loads(Path(answers_file).read_text()).items()}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            asked = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = answers[self.headers.get("X-Amz-Target", "").rsplit(".", 1)[-1]]
            name = json.loads(asked).get("ClusterName", RECORDED).encode()
            body = body.replace(RECORDED.encode(), name)  # each cluster's answer names that cluster
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: {len(body)}\r\n\r\n"
            self.wfile.write(head.encode() + body)  # one write: no delayed-ACK stall between head and body

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"endpoint: http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


def warm_up(client: Any) -> list[dict[str, Any]]:
    """One DescribeCluster and one UpdateCluster of a cluster outside the timed fleet, so each timed pass
    starts with its client's first-call work done and a connection open: the floor and the tick alike
    (only the floor had it, so the tick's figure carried botocore's first-call costs and the floor's did
    not), against the replay server (which answers any name with the recorded cluster). Returns the stop's
    groups: every member the request takes, at count 0."""
    describe = client.describe_cluster(ClusterName="warm-up")
    spec = client.meta.service_model.shape_for("ClusterInstanceGroupSpecification").members
    groups = [
        {**{k: v for k, v in g.items() if k in spec and k != "TargetCount"}, "InstanceCount": 0}
        for g in describe["InstanceGroups"]
    ]
    client.update_cluster(ClusterName="warm-up", InstanceGroups=groups)
    return groups


def floor_worker(endpoint: str, n: int, concurrency: int, production: bool = False) -> dict[str, Any]:
    """``production``: the same two calls through the client the tick uses (``aws.clients``: adaptive
    retries, the answer check, the call deadlines), to tell what the client adds from what the engine does."""
    import boto3

    client = boto3.Session(region_name="us-east-1").client("sagemaker", endpoint_url=endpoint)
    if production:
        from hyperpod_scheduler.aws.clients import sagemaker_client

        client = sagemaker_client(region="us-east-1", endpoint_url=endpoint)
    groups = warm_up(client)

    def one(name: str) -> None:
        client.describe_cluster(ClusterName=name)
        client.update_cluster(ClusterName=name, InstanceGroups=groups)

    t0, c0 = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, names(n)))
    return {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "load": load(), "rss": rss_mib()}


# --- the tick passes -------------------------------------------------------------------------------


def tick_worker(
    endpoint: str,
    n: int,
    concurrency: int,
    store_kind: str,
    traced: bool,
    replay: bool,
    unbounded: bool = False,
    threaded: bool = False,
) -> dict[str, Any]:
    """The ticks against the emulator; with ``replay``, only the first one, against the floor's server.
    ``unbounded``: a client without the call deadlines of ``aws.deadlines`` (to attribute their cost;
    production clients always have them). ``threaded``: the deadlines kept by handing each attempt to a
    worker thread (the fallback where the watchdog cannot be installed), not by the watchdog."""
    from emulator_bench import Http, _port
    from hyperpod_scheduler.aws.clients import sagemaker_client
    from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
    from hyperpod_scheduler.engine.runner import Engine
    from hyperpod_scheduler.schedule import resolve
    from hyperpod_scheduler.store.memory import MemoryStore
    from hyperpod_scheduler.store.sqlite import SqliteStore

    port = _port(endpoint)
    clock = {"now": START + timedelta(hours=1)}
    if not replay:
        clock["now"] = datetime.fromisoformat(Http(port).admin("GET", "clock")["now"])

    def advance(seconds: float) -> None:
        view = Http(port).admin("POST", "clock", {"advance_seconds": seconds})  # a new connection: idle ones close
        clock["now"] = datetime.fromisoformat(view["now"])

    # The production client (answer check, adaptive retries, no blind retries), built the way
    # app.compose builds it, pointed at the emulator.
    client = sagemaker_client(region="us-east-1", endpoint_url=endpoint)
    if threaded:
        client._endpoint.http_session.watched = False
    if unbounded:
        import boto3

        from hyperpod_scheduler.aws import answers
        from hyperpod_scheduler.aws.clients import RETRY_CONFIG, no_blind_retries

        plain = boto3.Session(region_name="us-east-1").client("sagemaker", endpoint_url=endpoint, config=RETRY_CONFIG)
        client = no_blind_retries(answers.watch(plain))
    warm_up(client)  # the replay server answers any name; the emulator has a cluster of that name (create_fleet)
    calls: Counter[str] = Counter()
    lock = threading.Lock()

    def count(model: Any, **_: Any) -> None:
        with lock:  # ticks run clusters in threads
            calls[model.name] += 1

    client.meta.events.register("before-call.sagemaker.*", count)
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore() if store_kind == "memory" else SqliteStore(Path(tmp) / "state.sqlite")
        engine = Engine(store, lambda ref: client, lambda: clock["now"])
        sched = resolve(SCHEDULE, {})
        fleet = [Governed(ref_for(name, "us-east-1"), "office", sched, False) for name in names(n)]
        rows = []
        for label, step in TICKS[:1] if replay else TICKS:
            seconds = (MONDAY - clock["now"]).total_seconds() if step is None else step
            if seconds:
                advance(seconds)
            calls.clear()
            if traced:
                tracemalloc.start()
            t0, c0 = time.perf_counter(), time.process_time()
            tick(engine, fleet, clock["now"], concurrency=concurrency)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            peak = tracemalloc.get_traced_memory()[1] / 2**20 if traced else 0.0
            if traced:
                tracemalloc.stop()
            rows.append(
                {
                    "label": label,
                    "wall": wall,
                    "cpu": cpu,
                    "calls": dict(calls),
                    "rss": rss_mib(),
                    "heap": peak,
                    "load": load(),
                }
            )
        store.close()
    return {"rows": rows}


def child(args: list[str], timeout: float = 3600) -> dict[str, Any]:
    env = {**os.environ, **CREDENTIALS}
    done = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:2])} failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@contextmanager
def replay_server(answers: dict[str, bytes]) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "answers.json"
        path.write_text(json.dumps({k: v.decode() for k, v in answers.items()}), encoding="utf-8")
        proc = subprocess.Popen(
            [sys.executable, __file__, "--serve-replay", str(path)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("endpoint: "):
                raise SystemExit(f"the replay server did not start: {line!r}")
            yield line.removeprefix("endpoint: ").strip()
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def pass_with_emulator(n: int, worker_args: list[str]) -> tuple[dict[str, Any], dict[str, bytes]]:
    with emulator_process() as endpoint:
        create_fleet(endpoint, n)
        answers = raw_answers(endpoint)
        return child(["--worker", "tick", "--endpoint", endpoint, *worker_args]), answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="100 clusters")
    parser.add_argument("--concurrency", type=int, default=8, help="clusters handled at once in a tick")
    parser.add_argument("--store", choices=("sqlite", "memory"), default="sqlite", help="the state store ticked")
    parser.add_argument(
        "--time-only", action="store_true", help="skip the memory pass (traced, 3-5x slower; its target is at 1,000)"
    )
    parser.add_argument("--worker", choices=("tick", "floor", "client-floor"), help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--replay", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--unbounded", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threaded", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-replay", help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = 100 if args.quick else args.clusters
    if args.serve_replay:
        serve_replay(args.serve_replay)
        return
    if args.worker == "tick":
        print(
            json.dumps(
                tick_worker(
                    args.endpoint,
                    n,
                    args.concurrency,
                    args.store,
                    args.traced,
                    args.replay,
                    args.unbounded,
                    args.threaded,
                )
            )
        )
        return
    if args.worker in ("floor", "client-floor"):
        production = args.worker == "client-floor"
        print(json.dumps(floor_worker(args.endpoint, n, args.concurrency, production)))
        return

    import botocore

    common = ["--clusters", str(n), "--concurrency", str(args.concurrency), "--store", args.store]
    print(
        f"machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
        f"botocore {botocore.__version__}; load average {load()} at start; {n:,} clusters, "
        f"tick concurrency {args.concurrency}, store: {args.store}; emulator and replay server"
        " each in their own process"
    )
    timed, answers = pass_with_emulator(n, common)
    with replay_server(answers) as endpoint:
        floor = child(["--worker", "floor", "--endpoint", endpoint, *common])
        ours = child(["--worker", "client-floor", "--endpoint", endpoint, *common])
        replayed = child(["--worker", "tick", "--endpoint", endpoint, "--replay", *common])
        unbounded = child(["--worker", "tick", "--endpoint", endpoint, "--replay", "--unbounded", *common])
    traced = None if args.time_only else pass_with_emulator(n, [*common, "--traced"])[0]
    per_floor = 1000 * floor["wall"] / n
    print(
        f"boto3 floor (DescribeCluster + UpdateCluster per cluster, one default boto3 client, {args.concurrency} "
        f"threads, replayed emulator answers): {floor['wall']:.2f} s = {per_floor:.2f} ms per cluster, "
        f"CPU {1000 * floor['cpu'] / n:.2f} ms per cluster (load {floor['load']})"
    )
    print(
        f"the same two calls through the tick's own client (adaptive retries, answer check, call deadlines): "
        f"{1000 * ours['wall'] / n:.2f} ms per cluster = {ours['wall'] / floor['wall']:.2f}x the floor; "
        f"CPU {1000 * ours['cpu'] / n:.2f} ms = {ours['cpu'] / floor['cpu']:.2f}x (load {ours['load']})"
    )
    row = replayed["rows"][0]
    print(
        f"the first tick (everything due: describe, intent, stop) against that same server: {row['wall']:.2f} s = "
        f"{1000 * row['wall'] / n:.2f} ms per cluster = {1000 * row['wall'] / n / per_floor:.2f}x the floor; "
        f"CPU {1000 * row['cpu'] / n:.2f} ms per cluster = {row['cpu'] / floor['cpu']:.2f}x the floor's "
        f"(load {row['load']}; beyond the floor: planning, the store, the answer check, the call deadlines, events)"
    )
    row = unbounded["rows"][0]
    print(
        f"the same, with a client without the call deadlines (attribution only): {1000 * row['wall'] / n:.2f} ms "
        f"per cluster = {1000 * row['wall'] / n / per_floor:.2f}x the floor; CPU {1000 * row['cpu'] / n:.2f} ms "
        f"= {row['cpu'] / floor['cpu']:.2f}x (load {row['load']})"
    )
    print()
    print("Against the emulator (its own process; the wall includes the emulator's answers on the other core):")
    print()
    print(
        "| tick | clusters | wall | per cluster | CPU per cluster | vs floor | API calls per cluster | by operation "
        "| peak RSS | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in timed["rows"]:
        total = sum(row["calls"].values())
        per = {k: round(v / n, 3) for k, v in sorted(row["calls"].items())}
        ratio = f"{1000 * row['wall'] / n / per_floor:.2f}x" if per.get("UpdateCluster") else "-"
        print(
            f"| {row['label']} | {n} | {row['wall']:.2f} s | {1000 * row['wall'] / n:.2f} ms | "
            f"{1000 * row['cpu'] / n:.2f} ms | {ratio} | "
            f"{total / n:.2f} | {per} | {row['rss']:.0f} MiB | {row['load']} |"
        )
    if traced is not None:
        print()
        print("Memory pass (another process, tracemalloc on, not timed): Python heap peak during each tick")
        print()
        print("| tick | heap peak | peak RSS (traced process) |")
        print("|---|---|---|")
        for row in traced["rows"]:
            print(f"| {row['label']} | {row['heap']:.1f} MiB | {row['rss']:.0f} MiB |")
    print()
    print(
        "Peak RSS is the whole tick process (interpreter, imports, boto3, the store) after each tick; "
        "targets (issue 16): due tick <= 1.25x the floor; 10,000 clusters due <= 45 s; RSS at 1,000 <= 120 MiB."
    )


if __name__ == "__main__":
    main()
