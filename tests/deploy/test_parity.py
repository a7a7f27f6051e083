"""One engine everywhere (issue 12): the same config and the same emulator world, run once through the
CLI's ``tick`` and once through the Lambda handlers (orchestrator -> SQS -> worker), give the same
UpdateCluster requests, the same records and the same history.

The config exercises every setting the worker used to drop: a ``keep`` group, a floor,
``release_scarce_capacity``, a checkpoint audit answered by the controller agent over the config's
channel (the state table, or S3 in the target account), start retries after a capacity rollback, and
a ready-by start. Each world gets its own moto and its own emulator, from the same seed: the emulator
draws ids and timings from one sequence, so the config ticks one cluster at a time (concurrency: 1)
for the two runs to be comparable call for call.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import boto3
import pytest
import yaml
from typer.testing import CliRunner

from hyperpod_scheduler.agent.channel import Channel, S3Channel, StoreChannel
from hyperpod_scheduler.agent.daemon import serve
from hyperpod_scheduler.agent.worker import SlurmSide
from hyperpod_scheduler.cli.main import app as cli_app
from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.deploy.handlers import orchestrator, worker
from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.slurm.memory import MemorySlurm
from hyperpod_scheduler.slurm.model import SlurmJob, SlurmNode
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.store.base import StateStore
from hyperpod_scheduler.store.dynamodb import DynamoDBStore, create_table
from tests.deploy.conftest import TABLE, FleetWorld, drain
from tests.engine.conftest import ROLE, START, three_tier_request
from tests.reliability.harness import account_emulator
from tests.store.dynamodb_mock import REGION, mocked_aws

ACCOUNT = "111111111111"
BUCKET = "hps-agent-channel"
STEP_S = 600
SEVEN = START.replace(hour=7)
UNTIL = START + timedelta(hours=3)  # Monday 06:00 to 09:00: the stops, the early start, the retries
# Four G5s when the clusters are created; someone takes two at 07:00; eight are back at 08:20. The
# 08:00 start of 'retry' rolls back (all or nothing) and is retried every 10 minutes until it fits.
CAPACITY = {
    "instance_types": {
        "ml.g5.48xlarge": {
            "available": 4,
            "schedule": [
                {"at": "2026-11-30T07:00:00Z", "available": 2},
                {"at": "2026-11-30T08:20:00Z", "available": 8},
            ],
        }
    }
}
CLUSTERS = {
    "kept": three_tier_request("kept"),
    "floor": three_tier_request("floor"),
    "scarce": slurm_request("scarce", {"gpu": ("ml.p5.48xlarge", 2)}, role=ROLE),
    "audited": three_tier_request("audited"),
    "retry": slurm_request("retry", {"gpu": ("ml.g5.48xlarge", 4)}, role=ROLE),
    "early": three_tier_request("early"),
}
NVME_JOB = SlurmJob("41", "llama-sft", "RUNNING", "ana", "train", ("t1",), "ckpt:/opt/dlami/nvme/ckpt")

ChannelKind = Literal["dynamodb", "s3"]
Face = Literal["cli", "fleet"]


def config(channel: ChannelKind) -> dict[str, Any]:
    """The one config both faces run (the fleet's target also names its account)."""
    return {
        "schedules": {
            "office": "Mon-Fri 08:00-18:00 UTC",
            "office-ready": {"windows": ["Mon-Fri 08:00-18:00 UTC"], "ready_by": True},
        },
        "defaults": {
            "schedule": "office",
            "concurrency": 1,
            "settle_timeout_minutes": 120,
            "lease_ttl_seconds": 1200,
            "retry": {"deadline_minutes": 120, "backoff_minutes": [10]},
            "ready_by": {"default_minutes": 30},
        },
        "targets": [
            {
                "region": REGION,
                "clusters": [
                    {"name": "kept", "policy": {"groups": {"train": "keep"}}},
                    {"name": "floor", "policy": {"groups": {"train": {"floor": 1}}}},
                    {"name": "scarce", "policy": {"release_scarce_capacity": True}},
                    {
                        "name": "audited",
                        "checkpoints": {
                            "policy": "block",
                            "channel": f"s3://{BUCKET}/hps"
                            if channel == "s3"
                            else f"dynamodb://{TABLE}?region={REGION}",
                            "nodes": {"dev": ["d1", "d2"], "train": ["t1", "t2", "t3"]},
                            "agent_timeout_seconds": 30,
                            "grace_minutes": 5,
                            "ready_timeout_minutes": 5,
                            "poll_seconds": 0.1,
                        },
                    },
                    {"name": "retry"},
                    {"name": "early", "schedule": "office-ready"},
                ],
            }
        ],
    }


@dataclass
class Outcome:
    updates: list[tuple[datetime, str, dict[str, Any]]] = field(default_factory=list)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)


def _record_updates(emu: Emulator, into: list[tuple[datetime, str, dict[str, Any]]]) -> None:
    """The emulator is the witness: every UpdateCluster it was sent, when, exactly as sent."""
    dispatch = emu.backend.dispatch

    def recording(operation: str, params: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        if operation == "UpdateCluster":
            into.append((emu.clock.now(), params["ClusterName"], params))
        return dispatch(operation, params, *args, **kwargs)

    emu.backend.dispatch = recording  # type: ignore[method-assign]


def _settle_all(emu: Emulator) -> None:
    client = _admin(emu)
    for _ in range(8 * 12):
        answers = [client.describe_cluster(ClusterName=n) for n in CLUSTERS]
        if all(
            a["ClusterStatus"] == "InService"
            and all(g["CurrentCount"] == g.get("TargetCount", g["CurrentCount"]) for g in a["InstanceGroups"])
            for a in answers
        ):
            return
        emu.advance(300)
    raise AssertionError("the clusters did not come up")


def _admin(emu: Emulator) -> Any:
    return boto3.client(
        "sagemaker", region_name=REGION, endpoint_url=emu.endpoint, aws_access_key_id="a", aws_secret_access_key="a"
    )


def _agent_channel(face: Face, kind: ChannelKind, emu: Emulator) -> Channel:
    """The controller agent's end of the channel, with the agent's own credentials."""
    if kind == "dynamodb":
        return StoreChannel(DynamoDBStore(TABLE, client=boto3.client("dynamodb", region_name=REGION)))
    if face == "cli":
        # The CLI with SageMaker on the emulator keeps S3 there too (loopback stays loopback): the
        # agent shares the bucket it reaches.
        s3 = boto3.client(
            "s3", region_name=REGION, endpoint_url=emu.endpoint, aws_access_key_id="a", aws_secret_access_key="a"
        )
    else:  # in the target account, where the worker reaches it through the spoke role
        creds = boto3.client("sts", region_name=REGION).assume_role(
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/cluster-execution", RoleSessionName="agent"
        )["Credentials"]
        s3 = boto3.Session(
            aws_access_key_id=creds["AccessKeyId"],
            aws_secret_access_key=creds["SecretAccessKey"],
            aws_session_token=creds["SessionToken"],
            region_name=REGION,
        ).client("s3")
    s3.create_bucket(Bucket=BUCKET)
    return S3Channel(BUCKET, "hps", s3)


@contextmanager
def _agent(channel: Channel, key: str) -> Iterator[MemorySlurm]:
    """The agent on 'audited''s controller: a training job there checkpoints to local NVMe."""
    nodes = [SlurmNode(n, "idle", "", "", ("dev",)) for n in ("d1", "d2")]
    nodes += [SlurmNode(n, "allocated" if n == "t1" else "idle", "", "", ("train",)) for n in ("t1", "t2", "t3")]
    slurm = MemorySlurm(nodes_=nodes, jobs_=[NVME_JOB])
    stop = threading.Event()
    thread = threading.Thread(
        target=serve,
        args=(channel, SlurmSide(slurm, name="agent@audited")),
        kwargs={"poll_seconds": 0.05, "stop": stop},
    )
    thread.start()
    try:
        yield slurm
    finally:
        stop.set()
        thread.join(timeout=30)


def _collect(store: StateStore, keys: dict[str, str], emu: Emulator, out: Outcome) -> None:
    for name, key in keys.items():
        record = store.get(key)
        out.records[name] = {} if record is None else record.model_dump(mode="json", exclude={"key"})
        out.history[name] = [e.model_dump(mode="json", exclude={"key", "actor"}) for e in store.history(key, limit=500)]
        groups = _admin(emu).describe_cluster(ClusterName=name)["InstanceGroups"]
        out.counts[name] = {g["InstanceGroupName"]: g["CurrentCount"] for g in groups}


def run_world(face: Face, kind: ChannelKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Outcome:
    out = Outcome()
    with (
        mocked_aws(),
        account_emulator(ACCOUNT, virtual_start=START, seed=3, capacity=CAPACITY, in_process=True) as emu,
    ):
        for request in CLUSTERS.values():
            _admin(emu).create_cluster(**request)
        _settle_all(emu)
        _record_updates(emu, out.updates)
        create_table(boto3.client("dynamodb", region_name=REGION), TABLE)
        # Records are keyed by the account the cluster's ARN names (the CLI learns it on its first look).
        key = f"{ACCOUNT}/{REGION}/audited"
        with _agent(_agent_channel(face, kind, emu), key):
            if face == "cli":
                _run_cli(emu, config(kind), tmp_path, monkeypatch, out)
            else:
                _run_fleet(emu, config(kind), out)
    return out


def _run_cli(emu: Emulator, cfg: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: Outcome) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path, state = tmp_path / "hyperpod-scheduler.yaml", tmp_path / "state.sqlite"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", emu.endpoint)
    while emu.clock.now() < UNTIL:
        at = emu.clock.now().isoformat()
        result = CliRunner().invoke(cli_app, ["tick", "--at", at, "--config", str(path), "--state", str(state)])
        # Exit 1 says a start failed (the capacity rollback); anything else would be a crash.
        assert result.exit_code in (0, 1) and isinstance(result.exception, SystemExit | None), (at, result.output)
        emu.advance(STEP_S)
    monkeypatch.delenv("AWS_ENDPOINT_URL_SAGEMAKER")
    with open_store(str(state)) as store:
        _collect(store, {n: f"{ACCOUNT}/{REGION}/{n}" for n in CLUSTERS}, emu, out)


def _run_fleet(emu: Emulator, cfg: dict[str, Any], out: Outcome) -> None:
    cfg["targets"][0]["account"] = ACCOUNT
    world = FleetWorld({ACCOUNT: emu})
    world.queue_url = boto3.client("sqs", region_name=REGION).create_queue(QueueName="hps-work")["QueueUrl"]
    config_store.write_text(config_store.Location("dynamodb", TABLE), yaml.safe_dump(cfg, sort_keys=False))
    runtime = world.runtime()
    while emu.clock.now() < UNTIL:
        orchestrator({}, None, runtime)
        assert worker({"Records": drain(world.queue_url)}, None, runtime) == {"batchItemFailures": []}
        emu.advance(STEP_S)
    with DynamoDBStore(TABLE, client=boto3.client("dynamodb", region_name=REGION)) as store:
        _collect(store, {n: f"{ACCOUNT}/{REGION}/{n}" for n in CLUSTERS}, emu, out)


@pytest.mark.parametrize("kind", ["dynamodb", "s3"])
def test_the_cli_and_the_lambda_worker_run_the_same_engine(
    kind: ChannelKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = run_world("cli", kind, tmp_path / "cli", monkeypatch)
    fleet = run_world("fleet", kind, tmp_path / "fleet", monkeypatch)

    # What each setting did (so that agreeing is about something).
    stops = {n: _counts(p) for at, n, p in cli.updates if at < SEVEN}  # the first tick's stops
    assert stops["kept"]["train"] == 3 and stops["kept"]["dev"] == 0  # policy groups.train: keep
    assert stops["floor"]["train"] == 1 and stops["floor"]["dev"] == 0  # a floor of 1
    assert stops["scarce"]["gpu"] == 0  # release_scarce_capacity: the P5s were given back
    assert "audited" not in stops and "audited" not in {n for _, n, _ in cli.updates}
    assert [e["outcome"] for e in cli.history["audited"]][-1] == "blocked"  # the 06:00 stop
    blocked = cli.history["audited"][-1]["detail"]
    assert "/opt/dlami/nvme/ckpt is instance-local storage" in blocked["reason"]
    assert blocked["verdicts"][0]["jobs"][0]["job_id"] == NVME_JOB.job_id
    starts = {name: [at for at, n, _ in cli.updates if n == name and at >= SEVEN] for name in CLUSTERS}
    assert starts["early"] == [START.replace(hour=7, minute=30)]  # ready by 08:00: 30 minutes early
    assert len(starts["retry"]) >= 2  # the 08:00 start rolled back; a retry came 10 minutes after it
    assert cli.records["retry"]["retry"] is None and cli.records["retry"]["applied_state"] == "running"
    for name, request in CLUSTERS.items():  # by 09:00 every cluster is back at its own size
        assert cli.counts[name] == _counts(request), name

    # And the worker did exactly the same.
    assert fleet.updates == cli.updates
    assert fleet.records == cli.records
    assert fleet.history == cli.history
    assert fleet.counts == cli.counts


def _counts(params: dict[str, Any]) -> dict[str, int]:
    return {g["InstanceGroupName"]: g["InstanceCount"] for g in params["InstanceGroups"]}
