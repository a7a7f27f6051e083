"""The 19:00 wave of a 10,000-cluster fleet through the real orchestrator and worker, on a simulated clock.

    .venv/bin/python bench/fleet_wave_bench.py [--targets 400] [--clusters 25] [--quick]

What is real: ``deploy.handlers.orchestrator`` and ``deploy.handlers.worker`` (jobs, queue markers,
the token buckets, deferral, retries), the engine they build through the composition root, botocore
clients (serialisation, retries, the answer checks), and the HyperPod emulator's model answering them.
What is simulated, each on one virtual clock that moves only when every simulated thread waits:

- SageMaker's throttling: a token bucket per (account, region) and kind of call (UpdateCluster at the
  scenario's rate, reads at 5x it, burst 2), answering ThrottlingException; 150 ms per call;
- SQS (the hub template's visibility timeout, retention and redrive), Lambda's event source (batch
  size 1, MaximumConcurrency and timeout from the hub template, up to 5 more concurrent runs a second
  as Lambda scales an SQS event source) and a 20 ms invocation overhead;
- DynamoDB (the queue markers on moto, the state in the memory store) at 8 ms a call, STS at 50 ms.

It prints, per scenario: the time from the 19:00 transition to the last UpdateCluster accepted, the
messages that expired or were dead-lettered, the oldest a message got, and a monthly cost estimate
with its assumptions. Targets: every stop within 5 minutes at 1 UpdateCluster/s per account and
region; no message lost at 0.2/s.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import os
import sys
import threading
import time
import types
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import botocore.endpoint
from botocore.awsrequest import AWSResponse
from botocore.config import Config

from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.deploy import config_store, handlers
from hyperpod_scheduler.deploy.jobs import MAX_MESSAGE_BYTES
from hyperpod_scheduler.deploy.observe import dimension_sets, orchestrator_emf
from hyperpod_scheduler.deploy.templates import load_template
from hyperpod_scheduler.emulator.backend import HyperPodBackend
from hyperpod_scheduler.emulator.capacity import CapacityModel
from hyperpod_scheduler.emulator.clock import VirtualClock as EmulatorClock
from hyperpod_scheduler.emulator.protocol import AwsJsonApi
from hyperpod_scheduler.store.codec import encode_history, encode_record
from hyperpod_scheduler.store.dynamodb import create_table
from hyperpod_scheduler.store.memory import MemoryStore
from hyperpod_scheduler.store.records import ClusterRecord, cluster_key

TRANSITION = datetime(2026, 11, 30, 19, 0, tzinfo=UTC)  # Monday: "Mon-Fri 08:00-19:00 UTC" turns stopped
START = TRANSITION - timedelta(minutes=1)  # one quiet tick first: what every other minute of the month costs
SCHEDULE = "Mon-Fri 08:00-19:00 UTC"
TABLE = "hps-state"
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/999999999999/hps-work"
SIM_ENDPOINT = "https://sagemaker.sim.invalid"
ROLE = "arn:aws:iam::999999999999:role/bench"
LATENCY = {"sagemaker": 0.150, "dynamodb": 0.008, "sqs": 0.020, "sts": 0.050, "invoke": 0.020}
READS_PER_UPDATE = 5.0
AWS_BURST = 2
SCALE_PER_S = 5  # Lambda adds up to 300 concurrent SQS batches a minute
PRICES = {  # us-east-1, on-demand list prices (Lambda on arm64, the template's default), per unit
    "lambda_gb_s": 0.0000133334, "lambda_request": 0.20e-6, "sqs_request": 0.40e-6, "ddb_write": 0.625e-6,
    "ddb_read": 0.125e-6, "log_gb": 0.50, "log_stored_gb_month": 0.03, "metric_month": 0.30,
    "alarm_month": 0.10, "kms_key_month": 1.00,
}  # fmt: skip
# When these were read off AWS's pricing pages (DynamoDB on-demand as cut on 2024-11-01); not re-checked since.
PRICES_DATE = "2024-11-01"
# Lambda gives a function one vCPU at 1,769 MB and a share in proportion below: a second of CPU in this
# process is this many seconds of a function of ``memory`` MB.
FULL_CORE_MB = 1769
LAMBDA_REPORT_BYTES = 350  # START, END and REPORT lines Lambda writes per invocation


# ---- the virtual clock ---------------------------------------------------------------------------


class Clock:
    """Virtual seconds since START. Time moves only when no simulated thread is running: each one is
    counted from ``spawn`` (or ``fork``) to its end, and is not counted while it sleeps here. Every
    sleeper waits on its own event, so waking a few of a thousand threads costs a few wake-ups."""

    def __init__(self) -> None:
        self.t = 0.0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._active = 0
        self._wakeups: list[tuple[float, int, threading.Event]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return START + timedelta(seconds=self.t)

    def monotonic(self) -> float:
        return self.t

    def _stop_counting(self) -> None:  # with the lock held
        self._active -= 1
        if self._active == 0:
            self._idle.notify()

    def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        woken = threading.Event()
        with self._lock:
            heapq.heappush(self._wakeups, (self.t + seconds, next(self._seq), woken))
            self._stop_counting()
        woken.wait()

    def spawn(self, fn: Callable[[], None]) -> None:
        with self._lock:
            self._active += 1
        threading.Thread(target=self._run, args=(fn,), daemon=True).start()

    def _run(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        finally:
            with self._lock:
                self._stop_counting()

    def fork(self, fns: Sequence[Callable[[], None]]) -> None:
        """Run ``fns`` as simulated threads and wait for all of them (the caller is one too)."""
        if not fns:
            return
        pending = [len(fns)]
        joined = threading.Event()
        with self._lock:
            self._active += len(fns) - 1  # the caller waits; its children run

        def child(fn: Callable[[], None]) -> None:
            try:
                fn()
            finally:
                with self._lock:
                    pending[0] -= 1
                    if pending[0] == 0:
                        self._active += 1  # the caller runs again
                        joined.set()
                    self._stop_counting()

        for fn in fns:
            threading.Thread(target=child, args=(fn,), daemon=True).start()
        joined.wait()

    def run(self, until: float, on_advance: Callable[[float], None], done: Callable[[], bool]) -> None:
        while True:
            with self._lock:
                while self._active:
                    self._idle.wait()
                if done() or not self._wakeups or self._wakeups[0][0] > until:
                    return
                self.t = self._wakeups[0][0]
                on_advance(self.t)
                due = []
                while self._wakeups and self._wakeups[0][0] <= self.t:
                    due.append(heapq.heappop(self._wakeups)[2])
                self._active += len(due)
            for woken in due:
                woken.set()

    def pool(self, fn: Callable[[Any], Any], items: Sequence[Any], n: int) -> list[Any]:
        """The worker's cluster pool, as simulated threads: at most ``n`` at once, results in order."""
        results: list[Any] = [None] * len(items)
        feed = iter(enumerate(items))
        lock = threading.Lock()

        def lane() -> None:
            while True:
                with lock:
                    nxt = next(feed, None)
                if nxt is None:
                    return
                results[nxt[0]] = fn(nxt[1])

        self.fork([lane] * min(max(n, 1), len(items)))
        return results


# ---- the simulated services ----------------------------------------------------------------------


@dataclass
class Usage:
    """What the hub pays for, counted as the simulation runs."""

    lambda_runs: int = 0
    gb_s: float = 0.0
    sqs_requests: int = 0
    ddb_reads: float = 0.0
    ddb_writes: float = 0.0
    log_bytes: int = 0
    log_events: int = 0
    ddb_calls: Counter[str] = field(default_factory=Counter)

    def minus(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, f) - getattr(other, f) for f in self.__dataclass_fields__))

    def copy(self) -> Usage:
        return Usage(*(Counter(v) if isinstance(v, Counter) else v for v in vars(self).values()))

    def dollars(self) -> dict[str, float]:
        return {
            "Lambda": self.gb_s * PRICES["lambda_gb_s"] + self.lambda_runs * PRICES["lambda_request"],
            "SQS": self.sqs_requests * PRICES["sqs_request"],
            "DynamoDB": self.ddb_writes * PRICES["ddb_write"] + self.ddb_reads * PRICES["ddb_read"],
            # Ingestion counts each event's bytes plus 26 bytes of overhead; stored for the retention (30 days).
            "CloudWatch Logs": (self.log_bytes + 26 * self.log_events)
            / 1e9
            * (PRICES["log_gb"] + PRICES["log_stored_gb_month"]),
        }


@dataclass
class Message:
    id: str
    body: str
    sent_at: float
    visible_at: float
    receives: int = 0


class Queue:
    """SQS as the hub template sets it up, in virtual time."""

    def __init__(self, clock: Clock, usage: Usage, visibility: float, retention: float, max_receives: int) -> None:
        self.clock, self.usage = clock, usage
        self.visibility, self.retention, self.max_receives = visibility, retention, max_receives
        self.messages: dict[str, Message] = {}
        self.dead: list[Message] = []
        self.expired = 0
        self.oldest_s = 0.0
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> dict[str, Any]:
        self.clock.sleep(LATENCY["sqs"])
        sizes = [len(e["MessageBody"].encode()) for e in Entries]
        assert len(Entries) <= 10 and sum(sizes) <= MAX_MESSAGE_BYTES, "SQS would refuse this batch"
        with self._lock:
            self.usage.sqs_requests += 1
            for e in Entries:
                mid = f"m{next(self._ids)}"
                self.messages[mid] = Message(mid, e["MessageBody"], self.clock.t, self.clock.t)
        return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}

    def change_message_visibility(self, QueueUrl: str, ReceiptHandle: str, VisibilityTimeout: int) -> None:
        self.clock.sleep(LATENCY["sqs"])
        with self._lock:
            self.usage.sqs_requests += 1
            if ReceiptHandle in self.messages:
                self.messages[ReceiptHandle].visible_at = self.clock.t + VisibilityTimeout

    def get_queue_attributes(self, QueueUrl: str, AttributeNames: list[str]) -> dict[str, Any]:
        self.clock.sleep(LATENCY["sqs"])
        with self._lock:
            self.usage.sqs_requests += 1
        return {"Attributes": {"ApproximateNumberOfMessages": str(self.waiting())}}

    def receive(self, n: int) -> list[Message]:
        now = self.clock.t
        out = []
        with self._lock:
            self.usage.sqs_requests += 1
            for m in sorted(self.messages.values(), key=lambda m: m.sent_at):
                age = now - m.sent_at
                if age > self.retention:
                    del self.messages[m.id]
                    self.expired += 1
                    continue
                if m.visible_at > now or len(out) >= n:
                    continue
                self.usage.sqs_requests += 1 if out else 0  # one ReceiveMessage per message (batch size 1)
                if m.receives >= self.max_receives:  # SQS's redrive: on the receive after the last
                    del self.messages[m.id]
                    self.dead.append(m)
                    continue
                m.receives += 1
                m.visible_at = now + self.visibility
                self.oldest_s = max(self.oldest_s, age)
                out.append(m)
        return out

    def delete(self, message: Message) -> None:
        with self._lock:
            self.usage.sqs_requests += 1
            self.messages.pop(message.id, None)

    def waiting(self) -> int:
        with self._lock:
            return sum(1 for m in self.messages.values() if m.visible_at <= self.clock.t)


class AwsThrottle:
    """SageMaker's side: a token bucket per (account, region, kind), independent of the client's."""

    def __init__(self, clock: Clock, updates_per_s: float) -> None:
        self.clock = clock
        self.rates = {"update": updates_per_s, "read": updates_per_s * READS_PER_UPDATE}
        self.buckets: dict[tuple[str, str, str], tuple[float, float]] = {}
        self.throttled = 0
        self._lock = threading.Lock()

    def admit(self, account: str, region: str, operation: str) -> bool:
        kind = "update" if operation == "UpdateCluster" else "read"
        rate = self.rates[kind]
        with self._lock:
            tokens, at = self.buckets.get((account, region, kind), (float(AWS_BURST), self.clock.t))
            tokens = min(float(AWS_BURST), tokens + (self.clock.t - at) * rate)
            if tokens < 1:
                self.buckets[(account, region, kind)] = (tokens, self.clock.t)
                self.throttled += 1
                return False
            self.buckets[(account, region, kind)] = (tokens - 1, self.clock.t)
            return True


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body


THROTTLED = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()


class SageMaker:
    """Answers every SageMaker request of the simulated accounts in-process, from the emulator's model."""

    def __init__(self, clock: Clock, throttle: AwsThrottle, backend: HyperPodBackend) -> None:
        self.clock, self.throttle, self.backend = clock, throttle, backend
        self.apis: dict[str, AwsJsonApi] = {}
        self.updates: dict[str, float] = {}  # cluster -> when its last UpdateCluster was accepted
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def client(self, session: boto3.Session, region: str) -> Any:
        client = session.client(
            "sagemaker", region_name=region, endpoint_url=SIM_ENDPOINT, config=Config(retries={"mode": "standard"})
        )
        client.meta.events.register_last("before-send", self._answer)
        return client

    def _answer(self, request: Any, **_: Any) -> AWSResponse:
        self.clock.sleep(LATENCY["sagemaker"])
        headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        operation = headers["X-Amz-Target"].split(".", 1)[1]
        auth = headers["Authorization"]
        account = auth.split("Credential=ASIA", 1)[1][:12]
        region = auth.split("/")[2]
        with self._lock:
            self.calls[operation] += 1
            api = self.apis.setdefault(account, AwsJsonApi(self.backend, account=account))
        if not self.throttle.admit(account, region, operation):
            return AWSResponse(request.url, 400, {"x-amzn-ErrorType": "ThrottlingException"}, _Raw(THROTTLED))
        reply = api.handle(headers["X-Amz-Target"], request.body or b"", auth)
        if operation == "UpdateCluster" and reply.status == 200:
            name = json.loads(request.body)["ClusterName"]
            with self._lock:
                self.updates[f"{account}/{name}"] = self.clock.t
        return AWSResponse(request.url, reply.status, dict(reply.headers), _Raw(reply.body))


class Sts:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def assume_role(self, RoleArn: str, RoleSessionName: str, DurationSeconds: int) -> dict[str, Any]:
        self.clock.sleep(LATENCY["sts"])
        account = RoleArn.split(":")[4]
        expires = self.clock.now() + timedelta(seconds=DurationSeconds)
        creds = {"AccessKeyId": f"ASIA{account}", "SecretAccessKey": "s", "SessionToken": "t", "Expiration": expires}
        return {"Credentials": creds}


class Paced:
    """A client or store whose every call takes ``latency`` of virtual time (and is counted, with its
    arguments and answer, so a unit can be sized as DynamoDB sizes it)."""

    def __init__(
        self, inner: Any, clock: Clock, latency: float, count: Callable[[str, Any, Any, Any], None], lock: Any
    ) -> None:
        self._inner, self._clock, self._latency, self._count, self._lock = inner, clock, latency, count, lock

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target) or name.startswith("_") or name in ("close", "__enter__", "__exit__"):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self._clock.sleep(self._latency)
            with self._lock:
                answer = target(*args, **kwargs)
                self._count(name, args, kwargs, answer)
                return answer

        return call

    def close(self) -> None:  # the worker closes its store after each run; the shared one lives on
        pass

    def __enter__(self) -> Paced:
        return self

    def __exit__(self, *_: Any) -> None:
        pass


def _units(size: int, unit: int) -> int:
    return max(1, -(-size // unit))


def ddb_units(usage: Usage) -> Callable[[str, Any, Any, Any], None]:
    """DynamoDB's on-demand request units for each call the hub makes, as the DynamoDB store would send
    it: reads strongly consistent (1 unit per 4 KB), writes 1 unit per KB, a transaction twice that.
    A call this does not know fails the run, so no request goes uncounted."""

    def count(name: str, args: Any, kwargs: Any, answer: Any) -> None:
        usage.ddb_calls[name] += 1
        if name == "get":  # GetItem of the record
            usage.ddb_reads += 1 if answer is None else _units(len(encode_record(answer)), 4096)
        elif name in ("get_item", "account_for"):  # a marker, the config item, an account binding
            usage.ddb_reads += 1
        elif name == "batch_get_item":
            usage.ddb_reads += sum(len(v["Keys"]) for v in kwargs["RequestItems"].values())
        elif name in ("history", "accounts_named"):  # a Query
            size = sum(len(encode_history(e)) for e in answer) if name == "history" else 100 * len(answer)
            usage.ddb_reads += _units(size, 4096)
        elif name == "put":  # PutItem of the record; with history lines one transaction (2x each item)
            record, history = args[0], (args[2] if len(args) > 2 else kwargs.get("history", ()))
            units = _units(len(encode_record(record)), 1024)
            units += sum(_units(len(encode_history(e)), 1024) for e in history)
            usage.ddb_writes += 2 * units if history else units
        elif name == "append_history":
            usage.ddb_writes += _units(len(encode_history(args[0])), 1024)
        elif name in ("put_item", "update_item", "delete_item", "acquire_lease", "renew_lease", "release_lease",
                      "bind_account"):  # fmt: skip
            usage.ddb_writes += 1
        else:
            raise AssertionError(f"DynamoDB call {name}: not counted by the bench")

    return count


# ---- one scenario --------------------------------------------------------------------------------


@dataclass
class Result:
    label: str
    updates_per_s: float
    clusters: int
    last_update_s: float | None
    sent: int
    expired: int
    dead: int
    left: int
    oldest_s: float
    runs: int
    timeouts: int
    throttled: int
    deferred: int
    wave: Usage
    quiet: Usage
    wall_s: float
    calls: dict[str, int] = field(default_factory=dict)


@contextmanager
def virtual_retries(clock: Clock) -> Iterator[None]:
    """botocore sleeps between retries with time.sleep: on the simulated clock instead."""
    module: Any = botocore.endpoint
    saved = module.time
    module.time = types.SimpleNamespace(sleep=clock.sleep, time=time.time)
    try:
        yield
    finally:
        module.time = saved


def fleet_yaml(targets: int, clusters: int) -> str:
    lines = [f"schedules: {{office: '{SCHEDULE}'}}", "defaults: {schedule: office}", "targets:"]
    for t in range(targets):
        names = ", ".join(f"t{t:03d}c{c:02d}" for c in range(clusters))
        lines.append(f"  - {{account: '{100000000000 + t}', region: us-east-1, clusters: [{names}]}}")
    return "\n".join(lines) + "\n"


def scenario(label: str, targets: int, clusters: int, updates_per_s: float, horizon_min: float) -> Result:
    from moto import mock_aws

    hub = load_template("hub")
    queue_props = hub["Resources"]["WorkQueue"]["Properties"]
    concurrency = int(hub["Parameters"]["WorkerConcurrency"]["Default"])
    timeout = float(hub["Parameters"]["WorkerTimeout"]["Default"])
    memory_gb = hub["Resources"]["WorkerFunction"]["Properties"]["MemorySize"] / 1024
    orchestrator_gb = hub["Resources"]["OrchestratorFunction"]["Properties"]["MemorySize"] / 1024
    tick_s = 60.0 * int(hub["Parameters"]["TickMinutes"]["Default"])

    clock = Clock()
    usage = Usage()
    queue = Queue(clock, usage, float(queue_props["VisibilityTimeout"]), float(queue_props["MessageRetentionPeriod"]),
                  int(queue_props["RedrivePolicy"]["maxReceiveCount"]))  # fmt: skip
    emu_clock = EmulatorClock(START - timedelta(hours=2))
    capacity = CapacityModel.from_dict({"instance_types": {"ml.m5.xlarge": "unlimited", "ml.c5.xlarge": "unlimited"}})
    backend = HyperPodBackend(emu_clock, capacity=capacity, seed=1)
    for t in range(targets):
        for c in range(clusters):
            request = slurm_request(f"t{t:03d}c{c:02d}", {"cpu": ("ml.c5.xlarge", 2)}, role=ROLE)
            backend.dispatch("CreateCluster", request, region="us-east-1", account=str(100000000000 + t))
    emu_clock.set(START)
    backend.process_due()
    sagemaker = SageMaker(clock, AwsThrottle(clock, updates_per_s), backend)
    store = MemoryStore()
    for t in range(targets):  # the state after this morning's start: running since 08:00
        for c in range(clusters):
            key = cluster_key(f"t{t:03d}c{c:02d}", "us-east-1", str(100000000000 + t))
            record = ClusterRecord.new(key, START).evolve(
                applied_state="running", applied_transition_at=TRANSITION.replace(hour=8)
            )
            store.put(record, expected_version=None)
    lock = threading.RLock()  # moto and the memory store, one request at a time like the services
    logs = [0]
    deferred = [0]
    timeouts = [0]
    running = [0]
    allowed = [5]

    def out(line: str) -> None:
        with lock:
            logs[0] += len(line) + 1
            usage.log_bytes += len(line) + 1
            usage.log_events += 1
            if '"Deferred"' in line:
                deferred[0] += json.loads(line).get("Deferred", 0)

    with mock_aws(), virtual_retries(clock):
        ddb = boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="b", aws_secret_access_key="b")
        create_table(ddb, TABLE)
        config_store.write_text(config_store.Location("dynamodb", TABLE), fleet_yaml(targets, clusters),
                                client_for=lambda s, r: ddb)  # fmt: skip
        paced_ddb = Paced(ddb, clock, LATENCY["dynamodb"], ddb_units(usage), lock)
        paced_store = Paced(store, clock, LATENCY["dynamodb"], ddb_units(usage), lock)
        sts = Sts(clock)

        def client_for(service: str, region: str | None) -> Any:
            return {"dynamodb": paced_ddb, "sqs": queue, "sts": sts}[service]

        def runtime() -> handlers.Runtime:
            return handlers.Runtime(
                table=TABLE, config_location=config_store.Location("dynamodb", TABLE), queue_url=QUEUE_URL,
                client_for=client_for, sagemaker_for=sagemaker.client, now=clock.now, out=out,
                store_factory=lambda: paced_store,
                max_receives=queue.max_receives, monotonic=clock.monotonic, sleep=clock.sleep, pool=clock.pool,
            )  # fmt: skip

        class Context:
            def __init__(self, started: float) -> None:
                self.started = started

            def get_remaining_time_in_millis(self) -> int:
                return int((self.started + timeout - clock.t) * 1000)

        def invoke(message: Message) -> None:
            started = clock.t
            clock.sleep(LATENCY["invoke"])
            record = {"messageId": message.id, "receiptHandle": message.id, "body": message.body,
                      "attributes": {"ApproximateReceiveCount": str(message.receives)}}  # fmt: skip
            answer = handlers.worker({"Records": [record]}, Context(started), runtime())
            took = clock.t - started
            with lock:
                usage.lambda_runs += 1
                usage.gb_s += min(took, timeout) * memory_gb
                usage.log_bytes += LAMBDA_REPORT_BYTES
                usage.log_events += 3
                running[0] -= 1
                if took > timeout:
                    timeouts[0] += 1  # Lambda would have cut it off: the message comes back
                    return
            if not answer["batchItemFailures"]:
                queue.delete(message)

        def ticker() -> None:
            while clock.t < horizon_min * 60 + 60:
                started, cpu = clock.t, time.thread_time()
                handlers.orchestrator({}, None, runtime())
                # Its own CPU (jobs, JSON, botocore; the in-process DynamoDB too: an upper bound) at the
                # function's share of a core, on top of the simulated calls' latency.
                cpu_s = (time.thread_time() - cpu) * FULL_CORE_MB / (orchestrator_gb * 1024)
                with lock:
                    usage.lambda_runs += 1
                    usage.gb_s += (max(clock.t - started, 0.001) + cpu_s) * orchestrator_gb
                    usage.log_bytes += LAMBDA_REPORT_BYTES
                    usage.log_events += 3
                clock.sleep(tick_s - (clock.t % tick_s))

        def poller() -> None:
            while clock.t < horizon_min * 60 + 60:
                waiting = queue.waiting()
                if waiting and allowed[0] < concurrency:
                    allowed[0] = min(concurrency, allowed[0] + SCALE_PER_S)
                free = allowed[0] - running[0]
                if free > 0 and waiting:
                    for message in queue.receive(min(free, waiting)):
                        with lock:
                            running[0] += 1
                        clock.spawn(lambda m=message: invoke(m))
                clock.sleep(1.0)

        def advance(t: float) -> None:
            emu_clock.set(START + timedelta(seconds=t))
            backend.process_due()

        expected = targets * clusters
        quiet_at: list[Usage] = []

        def done() -> bool:
            if clock.t >= 60 and not quiet_at:
                quiet_at.append(usage.copy())
            return len(sagemaker.updates) >= expected and running[0] == 0 and not queue.messages

        t0 = time.perf_counter()
        clock.spawn(ticker)
        clock.spawn(poller)
        clock.run(horizon_min * 60 + 60, advance, done)
        wall = time.perf_counter() - t0
        quiet = quiet_at[0] if quiet_at else Usage()
    last = max(sagemaker.updates.values()) - 60 if len(sagemaker.updates) >= expected else None
    return Result(
        label, updates_per_s, expected, last, len(sagemaker.updates), queue.expired,
        len(queue.dead), len(queue.messages), queue.oldest_s, usage.lambda_runs, timeouts[0],
        sagemaker.throttle.throttled, deferred[0], usage.minus(quiet), quiet, wall, dict(sagemaker.calls),
    )  # fmt: skip


# ---- the report ----------------------------------------------------------------------------------


def monthly(results: list[Result], targets: int, regions: int) -> list[str]:
    """Scale one quiet minute and one wave to a month: 22 workdays x 2 waves (the 08:00 start costs
    what the 19:00 stop does), every other tick quiet."""
    r = results[0]
    hub = load_template("hub")
    ticks = 30 * 24 * 60 // int(hub["Parameters"]["TickMinutes"]["Default"])
    waves = 22 * 2
    parts = {k: r.quiet.dollars()[k] * ticks + r.wave.dollars()[k] * waves for k in r.wave.dollars()}
    idle_receives = 5 * 3 * 60 * 24 * 30  # Lambda's five idle pollers, one 20 s long poll each
    parts["SQS"] += idle_receives * PRICES["sqs_request"]
    orchestrator_metrics = len(orchestrator_emf(0, 0, 0, TRANSITION)) - 1  # less the "_aws" block
    metrics = 6 * len(dimension_sets(False)[:1]) + 6 * regions + orchestrator_metrics
    per_account = 6 * targets * regions
    alarms = sum(1 for x in hub["Resources"].values() if x["Type"] == "AWS::CloudWatch::Alarm")
    parts["CloudWatch metrics"] = metrics * PRICES["metric_month"]
    parts["CloudWatch alarms"] = alarms * PRICES["alarm_month"]
    parts["KMS key"] = PRICES["kms_key_month"]
    total = sum(parts.values())
    lines = [
        f"Monthly cost at {targets} targets x {r.clusters // targets} clusters, {regions} region(s), a tick every "
        f"{ticks and 30 * 24 * 60 // ticks} min: about ${total:,.0f}",
        "| item | per month |",
        "|---|---|",
        *[f"| {k} | ${v:,.2f} |" for k, v in parts.items()],
        "",
        f"Prices: us-east-1 on-demand list prices as of {PRICES_DATE} "
        f"({', '.join(f'{k} {v:g}' for k, v in PRICES.items())}).",
        "",
        f"Counted from the simulated run's own calls: a quiet tick {_calls(r.quiet)}; the wave {_calls(r.wave)}.",
        "",
        f"Assumptions: {ticks:,} ticks a month, {waves} of them waves like this one and the rest like the "
        "quiet minute before it (every part queued, every cluster read from the table); DynamoDB units sized "
        "from each item (reads strongly consistent, 4 KB a unit; writes 1 KB a unit, transactions twice); "
        "one SQS ReceiveMessage per message (batch size 1) and Lambda's idle polling (5 pollers, a 20 s long "
        "poll each); every log line at its size plus 26 bytes, ingested and kept 30 days; Lambda billed for "
        "the simulated call latencies and, for the orchestrator, its measured CPU at its share of a core "
        f"(1 vCPU at {FULL_CORE_MB} MB; the workers' own CPU is not measured); {metrics} custom metrics "
        "(fleet-wide and per region). With hub.metrics_per_account the metrics alone would add "
        f"${per_account * PRICES['metric_month']:,.0f} ({per_account:,} more).",
    ]
    return lines


def _calls(u: Usage) -> str:
    ddb = ", ".join(f"{n} {c:,}" for n, c in sorted(u.ddb_calls.items()))
    return (
        f"{u.lambda_runs:,} Lambda runs, {u.gb_s:,.1f} GB-s, {u.sqs_requests:,} SQS requests, DynamoDB "
        f"{u.ddb_reads:,.0f} read / {u.ddb_writes:,.0f} write units ({ddb}), {u.log_events:,} log lines "
        f"({u.log_bytes / 1e6:,.2f} MB)"
    )


def ideal_s(clusters: int, targets: int, updates_per_s: float, concurrency: int) -> float:
    """The wave if every worker slot sent updates at exactly the rate AWS allows from the first second."""
    per_target = clusters / targets / updates_per_s
    rounds = -(-targets // concurrency)
    return per_target * rounds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--targets", type=int, default=400)
    parser.add_argument("--clusters", type=int, default=25)
    parser.add_argument("--quick", action="store_true", help="40 targets")
    parser.add_argument("--horizon-minutes", type=float, default=60.0)
    args = parser.parse_args()
    targets = 40 if args.quick else args.targets
    hub = load_template("hub")
    print(
        f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}  fleet: {targets} targets x {args.clusters} "
        f"clusters; WorkerConcurrency {hub['Parameters']['WorkerConcurrency']['Default']}, WorkerTimeout "
        f"{hub['Parameters']['WorkerTimeout']['Default']} s, tick every "
        f"{hub['Parameters']['TickMinutes']['Default']} min (the hub template's defaults)"
    )
    results = [
        scenario("1 UpdateCluster/s per account and region", targets, args.clusters, 1.0, args.horizon_minutes),
        scenario("0.2 UpdateCluster/s per account and region", targets, args.clusters, 0.2, args.horizon_minutes),
    ]
    print("| SageMaker allows | stops sent | last stop after 19:00 | messages lost (expired / DLQ) | oldest "
          "message | queued at the end | worker runs | timeouts | throttled | deferred | wall |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        last = f"{r.last_update_s:.0f} s" if r.last_update_s is not None else "not all sent"
        print(f"| {r.label} | {r.sent:,}/{r.clusters:,} | {last} | {r.expired} / {r.dead} | {r.oldest_s:.0f} s | "
              f"{r.left} | {r.runs:,} | {r.timeouts} | {r.throttled:,} | {r.deferred:,} | "
              f"{r.wall_s:.0f} s |")  # fmt: skip
    first, slow = results
    ok_fast = first.last_update_s is not None and first.last_update_s <= 300
    ok_slow = slow.expired == 0 and slow.dead == 0 and slow.sent == slow.clusters
    concurrency = int(hub["Parameters"]["WorkerConcurrency"]["Default"])
    ideal = ideal_s(slow.clusters, targets, slow.updates_per_s, concurrency)
    ratio = (slow.last_update_s or float("inf")) / ideal
    print(f"target: every stop within 5 min at 1/s: {'met' if ok_fast else 'NOT met'} "
          f"({first.last_update_s if first.last_update_s is not None else float('nan'):.0f} s)")  # fmt: skip
    print(f"target: no message lost at 0.2/s: {'met' if ok_slow else 'NOT met'} "
          f"({slow.expired} expired, {slow.dead} dead-lettered, all {slow.sent:,} stops sent)")  # fmt: skip
    print(f"target: the wave at 0.2/s within 1.3x of its ideal ({ideal:.0f} s): {'met' if ratio <= 1.3 else 'NOT met'} "
          f"({ratio:.2f}x)")  # fmt: skip
    print()
    for line in monthly(results, targets, regions=1):
        print(line)


if __name__ == "__main__":
    main()
