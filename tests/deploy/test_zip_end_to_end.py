"""The built zip, end to end: its handlers run from the zip's contents alone (``python -I -S``: no site
packages, no PYTHONPATH, nothing from this repository) against moto's server and the HyperPod emulator,
both on loopback, fed by a stand-in for Lambda's SQS event source that honours batch item failures
and SQS's redrive, so a job's retries and its dead-lettering happen for real.

The zip is unpacked before it runs, as Lambda unpacks it into /var/task: Python cannot import
extension modules (pydantic-core, PyYAML) from inside a zip. It is built for this machine's platform
and Python, since it runs here; the pins are the lock's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from hyperpod_scheduler.deploy import config_store, package
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.store.dynamodb import create_table
from tests.engine.conftest import three_tier_request

ACCOUNT = "123456789012"  # moto's account, and the emulator's
TABLE = "hps-state"
HERE = f"{sys.version_info.major}.{sys.version_info.minor}"
PLATFORM = "manylinux2014_x86_64" if os.uname().machine == "x86_64" else "manylinux2014_aarch64"
MAX_RECEIVES = 2
# The Lambda runtime's part: load a handler from the unpacked zip, call it per event read from stdin,
# answer on the pipe it is given; print() goes to stdout as in Lambda. It reports every module file it imported.
DRIVER = r"""
import json, os, sys
task = sys.argv[1]
sys.path.insert(0, task)
answers = os.fdopen(int(sys.argv[2]), "w")
import hyperpod_scheduler.deploy.handlers as handlers

class Context:
    def __init__(self, ms): self.ms = ms
    def get_remaining_time_in_millis(self): return self.ms

for line in sys.stdin:
    ask = json.loads(line)
    if ask["handler"] == "modules":
        files = sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())} - {""})
        answers.write(json.dumps({"ok": files}) + "\n"); answers.flush(); continue
    try:
        result = getattr(handlers, ask["handler"])(ask["event"], Context(ask.get("ms", 900000)))
        answers.write(json.dumps({"ok": result}) + "\n")
    except Exception as exc:
        answers.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
    answers.flush()
"""


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The zip, built as `deploy package` builds it (for this machine), unpacked as Lambda does."""
    out = tmp_path_factory.mktemp("dist")
    artefact = package.build(out, platform=PLATFORM, python=HERE)
    root = tmp_path_factory.mktemp("var-task")
    zipfile.ZipFile(artefact.path).extractall(root)
    (root / "artefact").write_text(artefact.path.name)
    return root


@dataclass
class Lambda:
    """One warm execution environment running the zip's handlers."""

    process: subprocess.Popen[str]
    answers: IO[str]
    logs: list[dict[str, Any]]

    def invoke(self, handler: str, event: Any, ms: int = 900_000) -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"handler": handler, "event": event, "ms": ms}) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.answers.readline())
        assert "error" not in answer, answer["error"]
        return answer["ok"]


@pytest.fixture
def world(task: Path, tmp_path: Path) -> Iterator[tuple[Lambda, Emulator, dict[str, str]]]:
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
    try:
        with running_emulator(virtual_start=datetime(2026, 11, 30, 19, 0, tzinfo=UTC)) as emu:
            ddb = boto3.client("dynamodb", endpoint_url=endpoint, **creds)
            create_table(ddb, TABLE)
            sqs = boto3.client("sqs", endpoint_url=endpoint, **creds)
            dlq = sqs.create_queue(QueueName="hps-dlq")["QueueUrl"]
            dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(MAX_RECEIVES)})
            work = sqs.create_queue(QueueName="hps-work", Attributes={"RedrivePolicy": redrive})["QueueUrl"]
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin"),
                "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ENDPOINT_URL": endpoint, "AWS_ENDPOINT_URL_SAGEMAKER": emu.endpoint,
                "HYPERPOD_SCHEDULER_TABLE": TABLE, "HYPERPOD_SCHEDULER_QUEUE_URL": work,
                "HYPERPOD_SCHEDULER_MAX_RECEIVES": str(MAX_RECEIVES), "HYPERPOD_SCHEDULER_RETRY_BACKOFF_SECONDS": "1",
            }  # fmt: skip
            read, write = os.pipe()
            process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", DRIVER, str(task), str(write)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                pass_fds=(write,),
                cwd=tmp_path,
            )
            os.close(write)
            lam = Lambda(process, os.fdopen(read), [])
            try:
                yield lam, emu, {"endpoint": endpoint, "work": work, "dlq": dlq}
            finally:
                out, err = process.communicate(timeout=30)  # closes its stdin: the runtime loop ends
                lam.logs.extend(json.loads(x) for x in out.splitlines() if x.startswith("{"))
                assert process.returncode == 0, err[-2000:]
    finally:
        moto.stop()


def event_source(lam: Lambda, sqs: Any, queue: str, *, until_empty_s: float = 4.0, limit_s: float = 40.0) -> int:
    """Lambda's SQS poller, batch size 1: deliver, delete what succeeded, leave what failed to come back
    (after the visibility the worker set); SQS itself dead-letters a message received too often."""
    invocations = 0
    deadline = time.monotonic() + limit_s
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        got = sqs.receive_message(
            QueueUrl=queue, MaxNumberOfMessages=1, WaitTimeSeconds=1,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        ).get("Messages", [])  # fmt: skip
        if not got:
            if time.monotonic() - quiet_since > until_empty_s:
                return invocations
            continue
        (m,) = got
        record = {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                  "attributes": m.get("Attributes", {}), "eventSource": "aws:sqs"}  # fmt: skip
        answer = lam.invoke("worker", {"Records": [record]})
        invocations += 1
        if not answer["batchItemFailures"]:
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=m["ReceiptHandle"])
        quiet_since = time.monotonic()
    raise AssertionError("the queue did not drain")


def test_the_zip_alone_stops_a_fleet_retries_a_failing_target_and_dead_letters_it(
    world: tuple[Lambda, Emulator, dict[str, str]], task: Path
) -> None:
    lam, emu, where = world
    admin = boto3.client("sagemaker", endpoint_url=emu.endpoint, region_name="us-east-1",
                         aws_access_key_id="a", aws_secret_access_key="a")  # fmt: skip
    admin.create_cluster(**three_tier_request("train"))
    emu.advance(3600)
    fleet = (
        "schedules: {dark: never}\n"
        "defaults: {schedule: dark}\n"
        f"targets:\n  - {{account: '{ACCOUNT}', region: us-east-1, clusters: [train]}}\n"
        f"  - {{account: '{ACCOUNT}', region: eu-west-1, clusters: [ghost]}}\n"  # no such cluster: every one fails
    )
    clients = lambda service, region: boto3.client(  # noqa: E731
        service, endpoint_url=where["endpoint"], region_name=region or "us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
    )  # fmt: skip
    config_store.write_text(config_store.Location("dynamodb", TABLE), fleet, client_for=clients)
    sqs = clients("sqs", None)

    summary = lam.invoke("orchestrator", {})
    assert (summary["queued"], summary["in_flight"]) == (2, 0)
    assert lam.invoke("orchestrator", {})["queued"] == 0  # both still queued: not queued again
    invocations = event_source(lam, sqs, where["work"])

    # train was stopped by the zip's worker, through the emulator.
    groups = admin.describe_cluster(ClusterName="train")["InstanceGroups"]
    assert {g["InstanceGroupName"]: g["TargetCount"] for g in groups} == dict.fromkeys(
        ("controller", "dev", "train"), 0
    )
    # ghost failed on each of its MAX_RECEIVES deliveries and went to the dead-letter queue.
    assert invocations == 1 + MAX_RECEIVES
    dead = sqs.receive_message(QueueUrl=where["dlq"], MaxNumberOfMessages=10).get("Messages", [])
    assert [json.loads(m["Body"])["region"] for m in dead] == ["eu-west-1"]
    # Both parts are free again: the next tick queues them afresh.
    assert lam.invoke("orchestrator", {})["queued"] == 2

    # Nothing but the standard library and the unpacked zip was imported.
    files = lam.invoke("modules", None)
    stdlib = (sys.base_prefix, sys.base_exec_prefix)
    foreign = [f for f in files if not f.startswith(str(task)) and not f.startswith(stdlib)]
    assert foreign == []
    assert any(f.startswith(str(task / "pydantic_core")) for f in files)


def test_two_builds_with_their_dependencies_match_byte_for_byte(task: Path, tmp_path: Path) -> None:
    again = package.build(tmp_path, platform=PLATFORM, python=HERE)
    assert again.path.name == (task / "artefact").read_text()
