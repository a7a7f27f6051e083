"""Issue 27 item 8: while AWS does not answer, the faces say so and since when. A DescribeCluster that
fails is kept on the cluster's record (the last failed read, and the last good one), and `status` (table
and JSON) and the dashboard read "AWS unreachable since ...; sizes as of ..." instead of showing the
record's sizes as live. The emulator's faults answer every call with HTTP 500."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from botocore.config import Config as BotoConfig
from botocore.exceptions import (
    CapacityNotAvailableError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    IncompleteReadError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    ProfileNotFound,
    ReadTimeoutError,
    UnauthorizedSSOTokenError,
)
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from hyperpod_scheduler.app.compose import Context, chain_clients
from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.cli.main import app as cli_app
from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.engine import reads
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.web import Dashboard, create_app
from tests.engine.conftest import ROLE, START, settle
from tests.sessions import shared_session

NAME = "c1"
FAST = {"provisioning": [300, 360], "ami_setup": [200, 240], "deep_health_check": [1800, 2000]}


@dataclass
class Rig:
    emu: Emulator
    client: Any
    config: Path
    state: Path

    def tick(self) -> list[Any]:
        with open_store(str(self.state)) as store:
            ctx = Context(load_config(self.config), store, chain_clients(lambda ref: self.client), self.emu.clock.now)
            return [r.kind for r in ctx.tick(ctx.fleet().governed())]

    def record(self) -> Any:
        with open_store(str(self.state)) as store:
            [key] = [k for k in store.list_keys() if k.endswith(f"/{NAME}")]
            return store.get(key)

    def status(self, exit_code: int = 0) -> dict[str, Any]:
        at = self.emu.clock.now().isoformat()
        argv = ["status", "--json", "--config", str(self.config), "--state", str(self.state), "--at", at]
        result = CliRunner().invoke(cli_app, argv)
        assert result.exit_code == exit_code, result.output
        [row] = json.loads(result.output)
        return dict(row)

    def api(self) -> dict[str, Any]:
        dash = Dashboard(
            config_file=str(self.config),
            state=str(self.state),
            now=self.emu.clock.now,
            client_for=lambda r: self.client,
            aws=AwsClients(self.emu.endpoint),
        )
        [row] = TestClient(create_app(dash, allowed_hosts=["testserver"])).get("/api/fleet").json()
        return dict(row)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    with running_emulator(virtual_start=START, seed=5, capacity={"timing": FAST}, in_process=True) as emu:
        session = shared_session()
        # One attempt a call: a failing AWS fails at once, not after botocore's backoff.
        client = session.client(
            "sagemaker", endpoint_url=emu.endpoint, config=BotoConfig(retries={"total_max_attempts": 1})
        )
        client.create_cluster(**slurm_request(NAME, {"gpu": ("ml.g5.12xlarge", 2)}, role=ROLE))
        settle(emu, client, NAME)
        config, state = tmp_path / "hyperpod-scheduler.yaml", tmp_path / "state.sqlite"
        document = {
            "state": str(state),
            "targets": [{"region": "us-east-1", "clusters": [{"name": NAME, "schedule": "Mon-Fri 08:00-18:00 UTC"}]}],
        }
        config.write_text(yaml.safe_dump(document), encoding="utf-8")
        yield Rig(emu, client, config, state)


def test_status_and_the_dashboard_say_since_when_aws_has_not_answered(rig: Rig) -> None:
    # Monday 06:00: the schedule wants the cluster stopped; the stop goes out and settles.
    rig.tick()
    settle(rig.emu, rig.client, NAME)
    rig.tick()
    settled = rig.record()
    assert settled.reads is None  # a good read alone is never written: it changes nothing shown
    assert rig.status()["aws"]["reachable"] is True
    # 08:00: the start is due, and AWS answers nothing but HTTP 500.
    rig.emu.advance((START.replace(hour=8) - rig.emu.clock.now()).total_seconds())
    rig.emu.faults = {"error_rate": 1.0}
    assert rig.tick() == ["error"]
    failed_at = rig.emu.clock.now()
    bad = rig.record().reads
    assert bad.failing_since == failed_at and bad.failed_at == failed_at
    assert bad.sizes_as_of == settled.updated_at  # what the record holds is as of its last write
    assert "InternalFailure" in (bad.error or "") or "500" in (bad.error or "")
    rig.emu.advance(300)
    rig.tick()  # a later failure keeps the first one's time
    assert rig.record().reads.failing_since == failed_at
    said = f"AWS unreachable since Mon 30 Nov 08:00 UTC; sizes as of Mon 30 Nov {settled.updated_at:%H:%M} UTC"
    for row in (rig.status(exit_code=1), rig.api()):  # a monitor running `status` sees it: exit 1
        assert row["flags"][0] == {"kind": "stale", "text": said}, row["flags"]
        assert row["state_text"].startswith("stopped") and "(last known)" in row["state_text"], row["state_text"]
        assert row["aws"]["reachable"] is False and row["aws"]["failing_since"] == failed_at.isoformat()
        assert row["aws"]["sizes_as_of"] == settled.updated_at.isoformat()
    table = CliRunner().invoke(
        cli_app,
        ["status", "--config", str(rig.config), "--state", str(rig.state), "--at", rig.emu.clock.now().isoformat()],
        env={"COLUMNS": "400"},
    )
    assert "AWS unreachable since Mon 30 Nov 08:00 UTC" in table.output, table.output
    assert table.exit_code == 1, "status exited 0 while it showed every figure as stale"
    # AWS answers again: the start goes out, and the faces no longer call anything stale.
    rig.emu.faults = {"error_rate": 0.0}
    rig.tick()
    after = rig.record().reads
    assert not after.failing and after.ok_at is not None and after.ok_at > failed_at
    assert all(f["kind"] != "stale" for f in rig.status()["flags"]) and rig.status()["aws"]["reachable"] is True


def test_an_answer_is_not_a_failed_read_and_a_connection_that_fails_is() -> None:
    not_found = ClientError(
        {"Error": {"Code": "ResourceNotFound", "Message": "no"}, "ResponseMetadata": {"HTTPStatusCode": 400}},
        "Describe",
    )
    throttled = ClientError(
        {"Error": {"Code": "ThrottlingException"}, "ResponseMetadata": {"HTTPStatusCode": 400}}, "D"
    )
    assert not reads.unanswered(not_found)
    assert reads.unanswered(throttled)
    assert reads.unanswered(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    assert not reads.unanswered(ValueError("a bug"))


@pytest.mark.parametrize(
    "exc",
    [
        ReadTimeoutError(endpoint_url="https://sagemaker.us-east-1.amazonaws.com"),
        ConnectTimeoutError(endpoint_url="https://sagemaker.us-east-1.amazonaws.com"),
        ConnectionClosedError(endpoint_url="https://sagemaker.us-east-1.amazonaws.com"),
        IncompleteReadError(actual_bytes=10, expected_bytes=100),
        CapacityNotAvailableError(),
    ],
    ids=type,
)
def test_a_request_that_got_no_whole_answer_is_unanswered(exc: Exception) -> None:
    assert reads.unanswered(exc)


@pytest.mark.parametrize(
    "exc",
    [
        NoCredentialsError(),
        ProfileNotFound(profile="team-a"),
        NoRegionError(),
        UnauthorizedSSOTokenError(),
        ParamValidationError(report="ClusterName is required"),
    ],
    ids=type,
)
def test_a_read_never_sent_is_not_aws_unreachable(exc: Exception) -> None:
    # No credentials, an expired SSO token, a profile or region not found: nothing was asked of AWS. Said
    # as "AWS unreachable" these sent a team to the network instead of its own configuration.
    assert not reads.unanswered(exc)


def test_only_a_change_of_reachability_is_written_never_a_good_read_alone() -> None:
    t0 = START
    recorded = t0 - timedelta(hours=1)  # the record's last write
    assert reads.merged(None, reads.Seen(ok_at=t0), recorded) is None  # nothing a face shows changes
    failing = reads.merged(None, reads.Seen(failed_at=t0 + timedelta(minutes=2), error="x"), recorded)
    assert failing is not None and failing.failing_since == t0 + timedelta(minutes=2)
    assert failing.sizes_as_of == recorded  # what the record holds is as of its last write
    # A good read earlier in the same turn: the sizes were known then.
    same_turn = reads.merged(
        None, reads.Seen(ok_at=t0 + timedelta(minutes=1), failed_at=t0 + timedelta(minutes=2)), recorded
    )
    assert same_turn is not None and same_turn.sizes_as_of == t0 + timedelta(minutes=1)
    again = reads.merged(failing, reads.Seen(failed_at=t0 + timedelta(minutes=5), error="y"), t0)
    assert again is not None and again.failing_since == failing.failing_since and again.sizes_as_of == recorded
    back = reads.merged(failing, reads.Seen(ok_at=t0 + timedelta(minutes=3)), t0)
    assert back is not None and not back.failing and back.ok_at == t0 + timedelta(minutes=3)
    assert reads.merged(back, reads.Seen(ok_at=t0 + timedelta(hours=3)), t0) is None


def test_an_error_aws_answers_ends_unreachable_without_moving_sizes_as_of(rig: Rig) -> None:
    # AWS fails, then answers again, but with an error (the cluster was deleted meanwhile, or the role
    # lost a permission): AWS is reachable. The record said "AWS unreachable since 08:00" for ever,
    # since only a read that returned a cluster cleared it.
    rig.tick()
    settle(rig.emu, rig.client, NAME)
    rig.tick()
    rig.emu.advance((START.replace(hour=8) - rig.emu.clock.now()).total_seconds())
    rig.emu.faults = {"error_rate": 1.0}
    rig.tick()
    failing = rig.record().reads
    assert failing.failing
    rig.emu.faults = {"error_rate": 0.0}
    rig.emu.advance(300)

    def gone(**_: Any) -> Any:
        raise ClientError(
            {
                "Error": {"Code": "ResourceNotFound", "Message": "no such cluster"},
                "ResponseMetadata": {"HTTPStatusCode": 400},
            },
            "DescribeCluster",
        )

    rig.client.describe_cluster = gone
    rig.tick()
    after = rig.record().reads
    assert not after.failing, after
    assert after.sizes_as_of == failing.sizes_as_of  # nothing was read: the sizes are as old as they were
    assert all(f["kind"] != "stale" for f in rig.status()["flags"]) and rig.status()["aws"]["reachable"] is True


def test_tonight_of_a_running_cluster_aws_does_not_describe_is_what_its_last_stop_kept(rig: Rig) -> None:
    # A floor keeps one node at each stop. The cluster runs (08:00, started), then AWS fails: the Fleet
    # page cannot forecast the stop, and "tonight" read "nothing but storage bills" - from the billing of
    # a stopped cluster, which a running one has none of.
    document = yaml.safe_load(rig.config.read_text(encoding="utf-8"))
    document["defaults"] = {"policy": {"groups": {"gpu": {"floor": 1}}}}
    rig.config.write_text(yaml.safe_dump(document), encoding="utf-8")
    rig.tick()
    settle(rig.emu, rig.client, NAME)
    rig.tick()
    rig.emu.advance((START.replace(hour=8) - rig.emu.clock.now()).total_seconds())
    rig.tick()
    settle(rig.emu, rig.client, NAME)
    rig.tick()
    assert rig.status()["state"] == "running"
    rig.emu.faults = {"error_rate": 1.0}
    tonight = rig.api()["tonight"]
    assert tonight["bills"], tonight
    kept = {k["group"]: k["count"] for k in tonight["kept"]}
    assert kept["gpu"] == 1 and sum(kept.values()) == 1 + kept.get("controller", 0), tonight  # the head with it
    assert "as the last stop kept them" in tonight["why"], tonight


def test_tonight_of_a_cluster_never_stopped_that_aws_does_not_describe_is_not_known(rig: Rig) -> None:
    rig.emu.advance((START.replace(hour=9) - rig.emu.clock.now()).total_seconds())  # running, never stopped
    rig.tick()
    rig.emu.faults = {"error_rate": 1.0}
    tonight = rig.api()["tonight"]
    assert tonight["bills"] is None and tonight["usd"] is None and "not known" in tonight["why"], tonight


def test_the_cluster_page_does_not_call_aws_unreachable_beside_its_own_fresh_describe(rig: Rig) -> None:
    """The record says the last tick's reads failed; AWS answers again before the next tick, and the
    cluster page describes the cluster itself: its banner and flags follow that newer read, not the
    older failure (one freshness per cluster per request)."""
    rig.tick()
    settle(rig.emu, rig.client, NAME)
    rig.tick()
    rig.emu.advance((START.replace(hour=8) - rig.emu.clock.now()).total_seconds())
    rig.emu.faults = {"error_rate": 1.0}
    assert rig.tick() == ["error"]
    assert rig.record().reads.failing
    rig.emu.faults = {"error_rate": 0.0}
    rig.emu.advance(60)
    dash = Dashboard(
        config_file=str(rig.config),
        state=str(rig.state),
        now=rig.emu.clock.now,
        client_for=lambda r: rig.client,
        aws=AwsClients(rig.emu.endpoint),
    )
    page = TestClient(create_app(dash, allowed_hosts=["testserver"])).get(f"/api/clusters/{NAME}").json()
    assert page["describe_error"] is None and page["groups"][0]["current"] is not None  # it read AWS itself
    assert page["aws"]["reachable"] is True, page["aws"]
    assert all(f["kind"] != "stale" for f in page["flags"]), page["flags"]
    assert "(last known)" not in page["state_text"], page["state_text"]
