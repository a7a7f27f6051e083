"""What the call deadlines cost: DescribeCluster per call through a plain boto3 client (the reference)
and through one bound by aws/deadlines.py (the body read with a cap, the deadline kept by the watchdog
of aws/watchdog.py) and checked by aws/answers.py, side by side against the same emulator; and the same
bound client with each attempt handed to a worker thread instead (the fallback where the watchdog
cannot be installed).

    .venv/bin/python bench/deadlines_bench.py [--calls 300] [--latency-ms 0] [--quick]

The emulator runs in this process, so the calls compete for the GIL with the server's threads: the
worst case for a thread hand-over. ``--latency-ms`` adds AWS-like latency per request, where the
difference all but vanishes.
"""

from __future__ import annotations

import argparse
import statistics
import time

import boto3

from hyperpod_scheduler.aws.clients import sagemaker_client
from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.emulator import running_emulator

ROLE = "arn:aws:iam::123456789012:role/bench"


def per_call_ms(client: object, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        client.describe_cluster(ClusterName="bench")  # type: ignore[attr-defined]
    return (time.perf_counter() - started) / calls * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--latency-ms", type=float, default=0)
    parser.add_argument("--quick", action="store_true", help="100 calls, 5 rounds")
    args = parser.parse_args()
    calls, rounds = (100, 5) if args.quick else (args.calls, args.rounds)
    with running_emulator(speed=60, seed=1) as emu:
        emu.backend.dispatch("CreateCluster", slurm_request("bench", {"cpu": ("ml.c5.xlarge", 4)}, role=ROLE))
        emu.faults = {"latency_ms": args.latency_ms}
        keys = {"aws_access_key_id": "b", "aws_secret_access_key": "b"}
        clients = {
            "plain boto3 (reference)": boto3.Session(region_name="us-east-1", **keys).client(
                "sagemaker", endpoint_url=emu.endpoint
            ),
            "bounded and checked": sagemaker_client(region="us-east-1", endpoint_url=emu.endpoint, **keys),
            "the same, worker threads": sagemaker_client(region="us-east-1", endpoint_url=emu.endpoint, **keys),
        }
        clients["the same, worker threads"]._endpoint.http_session.watched = False  # type: ignore[attr-defined]
        for client in clients.values():
            per_call_ms(client, 5)  # warm: connections, models
        timings: dict[str, list[float]] = {name: [] for name in clients}
        for _ in range(rounds):  # interleaved, so a busy moment of the machine hits both alike
            for name, client in clients.items():
                timings[name].append(per_call_ms(client, calls))
    print(f"DescribeCluster, {calls} calls x {rounds} rounds, added latency {args.latency_ms:g} ms")
    reference = statistics.median(timings["plain boto3 (reference)"])
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"  {name:<26} median {median:7.2f} ms/call  best {min(values):7.2f}  ({median / reference:4.2f}x)")


if __name__ == "__main__":
    main()
