"""How fast the emulator answers: DescribeCluster and UpdateCluster per second, and a 1,000-cluster fleet.

The server runs as `hyperpod-scheduler emulator serve` in its own process. Load comes from plain
``http.client`` connections with keep-alive (several processes, several threads each, with fixed dummy
SigV4 headers), because boto3's own per-call cost would hide the server's speed; the boto3 figure is
printed beside it. Run: ``.venv/bin/python bench/emulator_bench.py [--quick]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import botocore
from botocore.config import Config

ROLE = "arn:aws:iam::123456789012:role/hyperpod-execution"
VIRTUAL_START = "2026-11-30T08:00:00+00:00"
FAST = "1000000"  # emulated seconds per real second: a 15-minute provisioning takes about 1 ms
# Dummy SigV4 headers: the emulator reads the region from the scope and checks nothing else.
AUTH = (
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130/us-east-1/sagemaker/aws4_request, "
    "SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=" + "0" * 64
)
CAPACITY_YAML = "instance_types:\n  'ml.*': unlimited\n"  # the fleet must not hit the capacity model


def groups(workers: int) -> list[dict[str, Any]]:
    def group(name: str, itype: str, count: int, node_type: str) -> dict[str, Any]:
        slurm: dict[str, Any] = {"NodeType": node_type}
        if node_type == "Compute":
            slurm["PartitionNames"] = [name]
        return {
            "InstanceGroupName": name,
            "InstanceType": itype,
            "InstanceCount": count,
            "ExecutionRole": ROLE,
            "ThreadsPerCore": 1,
            "SlurmConfig": slurm,
        }

    return [
        group("controller", "ml.t3.medium", 1, "Controller"),
        group("cpu", "ml.c5.xlarge", workers, "Compute"),
    ]


def create_body(name: str, workers: int = 2) -> bytes:
    return json.dumps({"ClusterName": name, "InstanceGroups": groups(workers)}).encode()


def update_body(name: str, workers: int) -> bytes:
    return json.dumps({"ClusterName": name, "InstanceGroups": groups(workers)}).encode()


# --- the server ------------------------------------------------------------------------------------


@contextmanager
def emulator(*args: str) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp:
        capacity = Path(tmp) / "capacity.yaml"
        capacity.write_text(CAPACITY_YAML, encoding="utf-8")
        cmd = [sys.executable, "-m", "hyperpod_scheduler.cli.main", "emulator", "serve", "--capacity", str(capacity)]
        with (Path(tmp) / "stderr.txt").open("w+", encoding="utf-8") as err:
            proc = subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=err, text=True)
            try:
                assert proc.stdout is not None
                line = proc.stdout.readline()
                if not line.startswith("endpoint: "):
                    proc.wait(timeout=30)
                    err.seek(0)
                    raise SystemExit(f"the emulator did not start: {err.read().strip() or line!r}")
                yield line.removeprefix("endpoint: ").strip()
            finally:
                proc.terminate()
                proc.wait(timeout=30)


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


class Http:
    """One keep-alive connection speaking AWS JSON 1.1 with fixed dummy credentials."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, operation: str, body: bytes) -> tuple[int, bytes]:
        headers = {
            "Content-Type": "application/x-amz-json-1.1",
            "X-Amz-Target": f"SageMaker.{operation}",
            "X-Amz-Date": "20261130T080000Z",
            "Authorization": AUTH,
        }
        self.conn.request("POST", "/", body, headers)
        resp = self.conn.getresponse()
        return resp.status, resp.read()

    def admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        self.conn.request(method, f"/_emulator/{path}", json.dumps(body or {}).encode())
        return json.loads(self.conn.getresponse().read())


# --- load ------------------------------------------------------------------------------------------


@dataclass
class Load:
    ok: int = 0
    other: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.ok / self.seconds if self.seconds else 0.0


def _thread_loop(port: int, operation: str, cluster: str, until: float, out: list[tuple[int, int]]) -> None:
    client = Http(port)
    ok = other = 0
    n = 0
    body = b'{"ClusterName":"%s"}' % cluster.encode()
    while time.perf_counter() < until:
        if operation == "UpdateCluster":
            body = update_body(cluster, 1 + n % 2)  # alternate 1 and 2 workers: real scale work each time
        status, _ = client.call(operation, body)
        n += 1
        if status == 200:
            ok += 1
        else:
            other += 1
    out.append((ok, other))


def _process(args: tuple[int, str, list[str], float]) -> tuple[int, int]:
    port, operation, clusters, until_wall = args
    until = time.perf_counter() + (until_wall - time.time())
    out: list[tuple[int, int]] = []
    threads = [threading.Thread(target=_thread_loop, args=(port, operation, c, until, out)) for c in clusters]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(o for o, _ in out), sum(x for _, x in out)


def plain_http_load(port: int, operation: str, clusters: list[list[str]], seconds: float) -> Load:
    """``len(clusters)`` processes, one thread per cluster name in each, all for ``seconds``."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(len(clusters)) as pool:
        pool.map(_noop, range(len(clusters)))  # pay the spawn cost before the clock starts
        start = time.time() + 0.5
        until = start + seconds
        results = pool.map(_process, [(port, operation, c, until) for c in clusters])
    return Load(sum(r[0] for r in results), sum(r[1] for r in results), seconds)


def _noop(_: int) -> None:
    return None


def boto3_load(endpoint: str, call: Callable[[Any, int], Any], threads: int, seconds: float) -> Load:
    client = boto3.client(
        "sagemaker",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="dummy",
        config=Config(retries={"max_attempts": 1}, max_pool_connections=threads),
    )
    counts = [0] * threads
    errors = [0] * threads
    until = time.perf_counter() + seconds

    def loop(i: int) -> None:
        n = 0
        while time.perf_counter() < until:
            try:
                call(client, i * 1_000_000 + n)
                counts[i] += 1
            except client.exceptions.ClientError:
                errors[i] += 1
            n += 1

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(loop, range(threads)))
    return Load(sum(counts), sum(errors), time.perf_counter() - started)


# --- scenarios -------------------------------------------------------------------------------------


def request_rates(procs: int, threads: int, seconds: float) -> None:
    with emulator("--speed", FAST) as endpoint:
        port = _port(endpoint)
        names = [[f"bench-{p}-{t}" for t in range(threads)] for p in range(procs)]
        setup = Http(port)
        for row in names:
            for name in row:
                status, body = setup.call("CreateCluster", create_body(name))
                assert status == 200, body
        time.sleep(0.2)  # at FAST speed every cluster is InService well within this

        describe = plain_http_load(port, "DescribeCluster", names, seconds)
        print(
            f"DescribeCluster  plain HTTP ({procs} procs x {threads} threads, keep-alive): "
            f"{describe.rate:8,.0f} req/s  ({describe.ok:,} ok, {describe.other:,} other)"
        )
        flat = [n for row in names for n in row]
        b3 = boto3_load(
            endpoint,
            lambda c, n: c.describe_cluster(ClusterName=flat[n // 1_000_000 % len(flat)]),
            4,
            seconds,
        )
        print(f"DescribeCluster  boto3      (4 threads, one client):          {b3.rate:8,.0f} req/s")

        update = plain_http_load(port, "UpdateCluster", names, seconds)
        answered = (update.ok + update.other) / seconds
        print(
            f"UpdateCluster    plain HTTP ({procs} procs x {threads} threads, keep-alive): "
            f"{answered:8,.0f} req/s answered, {update.rate:,.0f}/s accepted "
            f"({update.other:,} ConflictException: the cluster was still Updating)"
        )

        def upd(c: Any, n: int) -> Any:
            name = flat[n // 1_000_000 % len(flat)]
            return c.update_cluster(ClusterName=name, InstanceGroups=groups(1 + n % 2))

        b3u = boto3_load(endpoint, upd, 4, seconds)
        print(
            f"UpdateCluster    boto3      (4 threads, one client):          "
            f"{(b3u.ok + b3u.other) / b3u.seconds:8,.0f} req/s answered, {b3u.rate:,.0f}/s accepted"
        )


def _create_fleet(port: int, size: int, threads: int) -> float:
    started = time.perf_counter()

    def create(chunk: range) -> None:
        client = Http(port)
        for i in chunk:
            status, body = client.call("CreateCluster", create_body(f"fleet-{i:04d}"))
            assert status == 200, body

    step = -(-size // threads)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, [range(s, min(s + step, size)) for s in range(0, size, step)]))
    return time.perf_counter() - started


def _in_service(client: Http) -> int:
    count, token = 0, None
    while True:
        body: dict[str, Any] = {"MaxResults": 100}
        if token:
            body["NextToken"] = token
        status, raw = client.call("ListClusters", json.dumps(body).encode())
        assert status == 200, raw
        page = json.loads(raw)
        count += sum(1 for s in page["ClusterSummaries"] if s["ClusterStatus"] == "InService")
        token = page.get("NextToken")
        if not token:
            return count


def fleet(size: int, threads: int) -> None:
    with emulator("--speed", FAST) as endpoint:
        port = _port(endpoint)
        started = time.perf_counter()
        created = _create_fleet(port, size, threads)
        client = Http(port)
        while _in_service(client) < size:
            pass
        total = time.perf_counter() - started
        print(
            f"Fleet, --speed {float(FAST):.0e}: {size:,} clusters created in {created:.1f} s "
            f"({size / created:,.0f} CreateCluster/s, {threads} keep-alive clients); "
            f"all InService {total:.1f} s after the first create"
        )
    with emulator("--virtual-start", VIRTUAL_START) as endpoint:
        port = _port(endpoint)
        created = _create_fleet(port, size, threads)
        client = Http(port)
        started = time.perf_counter()
        client.admin("POST", "clock", {"advance_seconds": 3600})
        jumped = time.perf_counter() - started
        ready = _in_service(client)
        total = time.perf_counter() - started
        print(
            f"Fleet, virtual clock: {size:,} clusters created in {created:.1f} s; one emulated hour "
            f"processed in {jumped:.1f} s; {ready:,}/{size:,} InService "
            f"{created + total:.1f} s after the first create"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="short run: 2 s per figure, a 200-cluster fleet")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per request-rate figure")
    parser.add_argument("--procs", type=int, default=2, help="client processes")
    parser.add_argument("--threads", type=int, default=4, help="keep-alive connections per client process")
    parser.add_argument("--fleet", type=int, default=None, help="clusters in the fleet figure")
    args = parser.parse_args()
    seconds = args.seconds or (2.0 if args.quick else 8.0)
    size = args.fleet or (200 if args.quick else 1000)
    print(
        f"machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
        f"botocore {botocore.__version__}; load average {os.getloadavg()[0]:.1f} at start; "
        "server: `emulator serve` in its own process"
    )
    request_rates(args.procs, args.threads, seconds)
    fleet(size, args.procs * args.threads)


if __name__ == "__main__":
    main()
