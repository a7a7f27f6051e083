"""The tick's CPU budget against the boto3 floor: what the tick's own client and the engine cost per
cluster beside the two calls any script must make (DescribeCluster, UpdateCluster), with the answers
given in process (botocore's ``before-send``), so no socket, server or thread switch is in the figures.

    .venv/bin/python bench/tick_budget_bench.py [--clusters 1000] [--rounds 5] [--quick]

``tick_parts_bench.py`` measures the whole tick over HTTP at concurrency 1 and 8, where the targets are
set (a due tick <= 1.25x the floor with the memory store, <= 1.5x with SQLite, at concurrency 8). This
bench says what those targets leave for the scheduler's own work: the floor over HTTP at concurrency 8
is measured in the same run, and a target of R times it leaves (R - 1) times it for the client's answer
check and retries, the planning, the guards, the request check and the records. Each figure is a fresh
process, variants in alternating order round after round; medians of CPU time (one thread: CPU is wall).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import tick_bench as tb  # noqa: E402  (the fleet, its schedule and the replay server live there)

ENDPOINT = "http://127.0.0.1:9"  # never reached: every request is answered at before-send
VARIANTS = ("boto3 floor", "the tick's client", "tick, memory store", "tick, sqlite store")


class _Raw:
    """What botocore reads an answer's body from."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body

    def read(self, *_: Any, **__: Any) -> bytes:
        body, self.body = self.body, b""
        return body


def _answering(client: Any, answers: dict[str, bytes]) -> None:
    from botocore.awsrequest import AWSResponse

    def answer(request: Any, **_: Any) -> AWSResponse:
        target = request.headers.get("X-Amz-Target", b"")
        operation = (target.decode() if isinstance(target, bytes) else target).rsplit(".", 1)[-1]
        name = json.loads(request.body or b"{}").get("ClusterName", tb.RECORDED)
        body = answers[operation].replace(tb.RECORDED.encode(), name.encode())  # each answer names its cluster
        headers = {"Content-Type": "application/x-amz-json-1.1", "Content-Length": str(len(body))}
        return AWSResponse(request.url, 200, headers, _Raw(body))

    client.meta.events.register_first("before-send.sagemaker.*", answer)


def _calls(n: int, answers: dict[str, bytes], production: bool) -> float:
    import boto3

    if production:
        from hyperpod_scheduler.aws.clients import sagemaker_client

        client = sagemaker_client(region="us-east-1", endpoint_url=ENDPOINT)
    else:
        client = boto3.Session(region_name="us-east-1").client("sagemaker", endpoint_url=ENDPOINT)
    _answering(client, answers)
    groups = tb.warm_up(client)
    c0 = time.process_time()
    for name in tb.names(n):
        client.describe_cluster(ClusterName=name)
        client.update_cluster(ClusterName=name, InstanceGroups=groups)
    return time.process_time() - c0


def _tick(n: int, answers: dict[str, bytes], store_kind: str) -> float:
    from hyperpod_scheduler.aws.clients import sagemaker_client
    from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
    from hyperpod_scheduler.engine.runner import Engine
    from hyperpod_scheduler.schedule import resolve
    from hyperpod_scheduler.store.memory import MemoryStore
    from hyperpod_scheduler.store.sqlite import SqliteStore

    client = sagemaker_client(region="us-east-1", endpoint_url=ENDPOINT)
    _answering(client, answers)
    now = tb.START + timedelta(hours=1)  # Sunday: every cluster is due to stop, seen for the first time
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore() if store_kind == "memory" else SqliteStore(Path(tmp) / "state.sqlite")
        engine = Engine(store, lambda ref: client, lambda: now)
        schedule = resolve(tb.SCHEDULE, {})
        warm = [Governed(ref_for(f"warm-{i}", "us-east-1"), "office", schedule, False) for i in range(20)]
        tick(engine, warm, now)
        fleet = [Governed(ref_for(name, "us-east-1"), "office", schedule, False) for name in tb.names(n)]
        c0 = time.process_time()
        results = tick(engine, fleet, now, concurrency=1)
        took = time.process_time() - c0
        store.close()
    sent = sum(1 for r in results if r.kind == "sent")
    if sent != n:
        kinds = sorted({r.kind for r in results})
        raise SystemExit(f"the tick stopped {sent} of {n} clusters (results: {kinds})")
    return took


def _worker(variant: str, n: int, answers_file: str) -> None:
    answers = {k: v.encode() for k, v in json.loads(Path(answers_file).read_text(encoding="utf-8")).items()}
    if variant == VARIANTS[0]:
        took = _calls(n, answers, production=False)
    elif variant == VARIANTS[1]:
        took = _calls(n, answers, production=True)
    else:
        took = _tick(n, answers, "memory" if "memory" in variant else "sqlite")
    print(json.dumps({"wall": took, "cpu": took}))  # one thread, nothing waited on: CPU is the wall


def _http_floor(n: int, answers: dict[str, bytes]) -> float:
    """The boto3 floor over HTTP at concurrency 8 against the replay server: CPU per cluster."""
    with tb.replay_server(answers) as endpoint:
        args = ["--worker", "floor", "--endpoint", endpoint]
        row = tb.child([*args, "--clusters", str(n), "--concurrency", "8", "--store", "memory"])
    return float(row["cpu"]) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="300 clusters, 3 rounds")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--answers", help=argparse.SUPPRESS)
    args = parser.parse_args()
    n, rounds = (300, 3) if args.quick else (args.clusters, args.rounds)
    if args.variant:
        _worker(args.variant, n, args.answers)
        return

    from tick_senders_bench import recorded, run

    answers = recorded(3)
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "answers.json"
        path.write_text(json.dumps({k: v.decode() for k, v in answers.items()}), encoding="utf-8")
        for i in range(rounds):
            for variant in VARIANTS if i % 2 == 0 else tuple(reversed(VARIANTS)):
                args = ["--variant", variant, "--answers", str(path), "--clusters", str(n)]
                cpu[variant].append(run(args, Path(__file__))[1])
    per = {v: 1000 * statistics.median(c) / n for v, c in cpu.items()}
    http_floor = 1000 * _http_floor(n, answers)
    floor, client, memory, sqlite = (per[v] for v in VARIANTS)
    print(
        f"{n:,} clusters, {rounds} rounds interleaved, one thread; CPU per cluster for DescribeCluster + "
        "UpdateCluster (floor, client) or the first tick (describe, intent, stop), answers given in process"
    )
    print(f"  {VARIANTS[0]:<20} {floor:5.2f} ms")
    print(f"  {VARIANTS[1]:<20} {client:5.2f} ms  (+{client - floor:.2f}: the answer check, adaptive retries)")
    print(
        f"  {VARIANTS[2]:<20} {memory:5.2f} ms  (+{memory - client:.2f} beyond its client: planning, guards, "
        "the request check, the intent and the record)"
    )
    print(f"  {VARIANTS[3]:<20} {sqlite:5.2f} ms  (+{sqlite - memory:.2f} beyond the memory store)")
    print(f"the boto3 floor over HTTP at concurrency 8 (replay server): {http_floor:.2f} ms CPU per cluster")
    for store, target, ours in (("memory", 1.25, memory), ("sqlite", 1.5, sqlite)):
        budget = (target - 1) * http_floor
        print(
            f"target {target}x with the {store} store leaves {budget:.2f} ms beyond the floor; the tick takes "
            f"{ours - floor:.2f} ms beyond it here ({(ours - floor) / budget:.1f}x that budget)"
        )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
