"""The dashboard's Fleet page and ``/api/fleet`` at fleet scale (issue 30): 10, 100 and 1,000 clusters,
named in the config and tag-selected, with 0 and 20 ms added to every AWS call.

    .venv/bin/python bench/fleet_page_bench.py [--runs 10] [--quick] [--sizes 10,100,1000]

For each size an emulator in its own process holds that many clusters (each tagged with its schedule);
one tick stops them all and a second follows the stops to settled, so every cluster has a record and a
history line. The dashboard is served by uvicorn in this process, as ``hyperpod-scheduler dashboard``
serves it, and read over keep-alive HTTP. Each figure is the median of ``--runs`` requests after a first
one (untimed there, shown beside): a fresh dashboard per row, so that first request pays the fleet's
first reading at that latency. Beside it, in the same run: ``/healthz`` (the app's own floor) and one
DescribeCluster through boto3 at the same added latency (what one AWS call costs). The AWS calls
the timed requests caused are counted at the dashboard's SageMaker client. Targets (issue 30): at 1,000
clusters, ``/`` (named and tag-selected) and ``/api/fleet`` <= 1 s with 20 ms added, <= 300 ms with
none; the page under 200 KB.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import uvicorn  # noqa: E402
import yaml  # noqa: E402

from emulator_bench import Http, _port  # noqa: E402
from hyperpod_scheduler.app.compose import Context, chain_clients  # noqa: E402
from hyperpod_scheduler.aws.clients import AwsClients, sagemaker_client  # noqa: E402
from hyperpod_scheduler.cluster.samples import slurm_request  # noqa: E402
from hyperpod_scheduler.config.load import load_config  # noqa: E402
from hyperpod_scheduler.config.model import SCHEDULE_TAG  # noqa: E402
from hyperpod_scheduler.store import open_store  # noqa: E402
from hyperpod_scheduler.web import Dashboard, create_app  # noqa: E402
from tick_bench import CREDENTIALS, ROLE, SCHEDULE, emulator_process, names  # noqa: E402

TARGETS = {0: 0.3, 20: 1.0}  # seconds at 1,000 clusters, by added latency
PAGE_KB = 200


def create_tagged(endpoint: str, n: int, threads: int = 8) -> None:
    """``n`` clusters, each tagged with the schedule that governs it (for the tag-selected config)."""
    port = _port(endpoint)

    def create(chunk: list[str]) -> None:
        client = Http(port)
        for name in chunk:
            body = slurm_request(name, {"cpu": ("ml.c5.xlarge", 2)}, role=ROLE)
            body["Tags"] = [{"Key": SCHEDULE_TAG, "Value": "office"}]
            status, raw = client.call("CreateCluster", json.dumps(body).encode())
            if status != 200:
                raise SystemExit(f"CreateCluster {name}: HTTP {status}: {raw[:200]!r}")

    all_names = names(n)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, [all_names[i::threads] for i in range(threads)]))
    Http(port).admin("POST", "clock", {"advance_seconds": 3600})


def configs(folder: Path, n: int, state: Path) -> dict[str, Path]:
    common = {"state": str(state), "schedules": {"office": SCHEDULE}, "defaults": {"concurrency": 8}}
    named = {
        **common,
        "targets": [{"region": "us-east-1", "clusters": [{"name": c, "schedule": "office"} for c in names(n)]}],
    }
    tagged = {**common, "targets": [{"region": "us-east-1", "tag_selector": True}]}
    out = {}
    for label, doc in (("named", named), ("tag-selected", tagged)):
        path = folder / f"{label}-{n}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        out[label] = path
    return out


def virtual_now(endpoint: str) -> datetime:
    return datetime.fromisoformat(Http(_port(endpoint)).admin("GET", "clock")["now"])


def seed(endpoint: str, config: Path, client: Any) -> None:
    """A stop of every cluster (Sunday: the office schedule wants them stopped), followed to settled."""
    port = _port(endpoint)
    with open_store(str(load_config(str(config)).state)) as store:
        at = {"now": virtual_now(endpoint)}
        ctx = Context(
            load_config(str(config)), store, chain_clients(lambda ref: client), lambda: at["now"], notify=False
        )
        governed = ctx.fleet().governed()
        ctx.tick(governed)
        Http(port).admin("POST", "clock", {"advance_seconds": 3600})
        at["now"] = virtual_now(endpoint)
        ctx.tick(governed)


@contextmanager
def serving(dash: Dashboard) -> Iterator[int]:
    server = uvicorn.Server(uvicorn.Config(create_app(dash), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield int(server.servers[0].sockets[0].getsockname()[1])
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def get(conn: http.client.HTTPConnection, path: str) -> tuple[float, int]:
    started = time.perf_counter()
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read()
    wall = time.perf_counter() - started
    if response.status != 200:
        raise SystemExit(f"GET {path}: HTTP {response.status}: {body[:300]!r}")
    return wall, len(body)


def timed(conn: http.client.HTTPConnection, path: str, runs: int) -> tuple[float, float, int]:
    """(first request, median of ``runs`` after it, bytes of the answer)."""
    first, size = get(conn, path)
    walls = [get(conn, path)[0] for _ in range(runs)]
    return first, statistics.median(walls), size


def one_describe(endpoint: str, runs: int) -> float:
    client = sagemaker_client(region="us-east-1", endpoint_url=endpoint)
    client.describe_cluster(ClusterName=names(1)[0])
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        client.describe_cluster(ClusterName=names(1)[0])
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def dashboard(config: Path, client: Any, endpoint: str, now: Callable[[], datetime]) -> Dashboard:
    return Dashboard(config_file=str(config), now=now, client_for=lambda ref: client, aws=AwsClients(endpoint))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="10 and 100 clusters, 3 runs")
    parser.add_argument("--sizes", default=None, help="comma-separated cluster counts (10,100,1000)")
    parser.add_argument("--latencies", default="0,20", help="comma-separated ms added to every AWS call")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else ([10, 100] if args.quick else [10, 100, 1000])
    runs = 3 if args.quick else args.runs
    latencies = [int(x) for x in args.latencies.split(",")]
    os.environ.update(CREDENTIALS)
    folder = Path(tempfile.mkdtemp(prefix="fleet-page-bench-"))
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start (other work on the "
        f"machine too); emulator in its own process, the dashboard served by uvicorn in this one; median of "
        f"{runs} requests after the first, keep-alive"
    )
    rows: list[dict[str, Any]] = []
    for n in sizes:
        with emulator_process() as endpoint:
            create_tagged(endpoint, n)
            state = folder / f"state-{n}.sqlite"
            paths = configs(folder, n, state)
            client = sagemaker_client(region="us-east-1", endpoint_url=endpoint)
            seed(endpoint, paths["named"], client)
            calls: Counter[str] = Counter()

            def count(model: Any, calls: Counter[str] = calls, **_: Any) -> None:
                calls.update([model.name])

            client.meta.events.register("before-call.sagemaker.*", count)
            admin = Http(_port(endpoint))
            for latency in latencies:
                admin.admin("POST", "faults", {"latency_ms": latency})
                base, t0 = virtual_now(endpoint), time.monotonic()

                def now(base: datetime = base, t0: float = t0) -> datetime:
                    return base + timedelta(seconds=time.monotonic() - t0)  # the virtual clock at real speed

                describe = one_describe(endpoint, runs)
                for label, config in paths.items():
                    dash = dashboard(config, client, endpoint, now)
                    with serving(dash) as port:
                        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                        _, floor, _ = timed(conn, "/healthz", runs)
                        calls.clear()
                        page_first, page, page_bytes = timed(conn, "/", runs)
                        page_calls = sum(calls.values())
                        calls.clear()
                        api_first, api, api_bytes = timed(conn, "/api/fleet", runs)
                        api_calls = sum(calls.values())
                        conn.close()
                    dash.close()
                    rows.append(
                        {
                            "latency": latency, "n": n, "label": label, "page": page, "page_first": page_first,
                            "page_kb": page_bytes / 1024, "api": api, "api_first": api_first,
                            "api_kb": api_bytes / 1024, "floor": floor, "describe": describe,
                            "page_calls": page_calls, "api_calls": api_calls,
                        }
                    )  # fmt: skip
            admin.admin("POST", "faults", {"latency_ms": 0})
    print()
    print(
        "| added latency per AWS call | clusters | selected | `/` median | `/` first | page size "
        "| `/api/fleet` median | `/api/fleet` first | AWS calls in all `/` requests (first too) "
        "| the same, `/api/fleet` | `/healthz` (floor) | one DescribeCluster (reference) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['latency']} ms | {r['n']:,} | {r['label']} | {_ms(r['page'])} | {_ms(r['page_first'])} | "
            f"{r['page_kb']:,.0f} KB | {_ms(r['api'])} | {_ms(r['api_first'])} | {r['page_calls']:,} | "
            f"{r['api_calls']:,} | {_ms(r['floor'])} | {_ms(r['describe'])} |"
        )
    print()
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    for latency, target in TARGETS.items():
        for label in ("named", "tag-selected"):
            got = [r for r in rows if r["latency"] == latency and r["n"] == 1000 and r["label"] == label]
            if not got:
                print(f"target (issue 30) Fleet page at 1,000 clusters, {label}, {latency} ms added: not measured")
                continue
            r = got[0]
            for what, wall in (("`/`", r["page"]), ("`/api/fleet`", r["api"])):
                verdict = "met" if wall <= target else "missed"
                print(
                    f"target (issue 30) {what} at 1,000 clusters, {label}, {latency} ms added <= {_ms(target)}: "
                    f"{_ms(wall)}, {verdict}"
                )
    big = [r for r in rows if r["n"] == 1000]
    for r in big[:1]:
        verdict = "met" if r["page_kb"] < PAGE_KB else "missed"
        print(f"target (issue 30) Fleet page under {PAGE_KB} KB at 1,000 clusters: {r['page_kb']:,.0f} KB, {verdict}")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


if __name__ == "__main__":
    main()
