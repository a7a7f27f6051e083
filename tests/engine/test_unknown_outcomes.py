"""An UpdateCluster whose answer is lost (a 500 after it was applied, a read timeout) or that meets a
ConflictException: whether it went out is decided from the cluster's own target counts, and botocore
never retries it blind."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import botocore.endpoint
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ReadTimeoutError

from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.emulator.errors import EmulatorError
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.conftest import START, settle, three_tier_request
from tests.reliability.harness import UpdateTally
from tests.sessions import shared_session

SIZES = {"controller": 1, "dev": 2, "train": 3}
# The production client's retry count in standard mode (adaptive adds real-time rate limiting).
RETRIES = Config(retries={"mode": "standard", "max_attempts": 8}, connect_timeout=5, read_timeout=30)


class Rig:
    def __init__(self, emu: Emulator) -> None:
        self.emu = emu
        self.tally = UpdateTally(emu)
        self.attempts: Counter[str] = Counter()
        session = shared_session()
        self.client = session.client("sagemaker", endpoint_url=emu.endpoint, config=RETRIES)
        self.client.meta.events.register("before-send.sagemaker.*", self._count)
        self.store = MemoryStore()
        self.events = Collector()
        self.engine = Engine(self.store, lambda _ref: self.client, emu.clock.now, events=self.events, sleep=emu.advance)
        from hyperpod_scheduler.engine.fleet import ref_for

        self.ref = ref_for("c1", "us-east-1")
        self.client.create_cluster(**three_tier_request())
        settle(emu, self.client, "c1")
        self.tally.reset()

    def _count(self, request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        name = (target.decode() if isinstance(target, bytes) else target).split(".")[-1]
        self.attempts[name] += 1

    def after_update(self, fail: Callable[[], Exception]) -> None:
        """The next UpdateCluster is applied by the model, then its answer is replaced by ``fail()``."""
        original = self.emu.backend.dispatch
        armed = [True]

        def dispatch(operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
            result = original(operation, params, **kw)
            if operation == "UpdateCluster" and armed and armed.pop():
                raise fail()
            return result

        self.emu.backend.dispatch = dispatch  # type: ignore[method-assign]

    def record(self) -> Any:
        return self.store.get(self.engine_key())

    def engine_key(self) -> str:
        keys = [k for k in self.store.list_keys() if k.endswith("/c1")]
        assert len(keys) == 1, keys
        return keys[0]

    def targets(self) -> dict[str, int]:
        d = self.client.describe_cluster(ClusterName="c1")
        return {g["InstanceGroupName"]: g["TargetCount"] for g in d["InstanceGroups"]}

    def outcomes(self) -> list[str]:
        return [e.outcome for e in self.store.history(self.engine_key())]


@pytest.fixture
def rig() -> Iterator[Rig]:
    with running_emulator(virtual_start=START, seed=3, in_process=True) as emu:
        yield Rig(emu)


def test_an_update_applied_but_answered_500_is_not_retried_and_is_followed(rig: Rig) -> None:
    rig.after_update(lambda: EmulatorError("InternalFailure", "answer lost", 500))
    result = rig.engine.act(rig.ref, "stop", transition_id="manual-stop@1")
    assert rig.tally.sent["c1"] == 1, "botocore re-sent a mutating call whose first attempt was applied"
    assert rig.attempts["UpdateCluster"] == 1
    assert result.kind == "sent", result
    assert rig.record().pending.phase == "sent"
    assert "refused" not in rig.outcomes()
    settle(rig.emu, rig.client, "c1")
    assert rig.engine.follow(rig.ref, wait=False).kind == "settled"
    assert rig.record().applied_state == "stopped"
    assert {n: s.count for n, s in rig.record().snapshot.sizes.items()} == SIZES


def test_a_conflict_after_an_applied_first_attempt_is_in_flight_not_refused(rig: Rig) -> None:
    # What a blind retry meets: the first attempt went through, the retry finds the cluster Updating.
    rig.after_update(lambda: EmulatorError("ConflictException", "Cluster c1 is in Updating state", 400))
    result = rig.engine.act(rig.ref, "stop", transition_id="manual-stop@1")
    assert result.kind == "sent", result
    assert rig.record().pending is not None and rig.record().pending.phase == "sent"
    assert "refused" not in rig.outcomes()


def test_a_conflict_with_someone_elses_update_is_refused_and_the_intent_withdrawn(rig: Rig) -> None:
    original = rig.emu.backend.dispatch
    done: list[bool] = []

    def dispatch(operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if operation == "UpdateCluster" and not done:
            done.append(True)  # someone resizes 'dev' between our look and our send
            d = original("DescribeCluster", {"ClusterName": "c1"})
            g = next(g for g in d["InstanceGroups"] if g["InstanceGroupName"] == "dev")
            keep = ("InstanceGroupName", "InstanceType", "ExecutionRole", "SlurmConfig", "LifeCycleConfig")
            original(
                "UpdateCluster",
                {"ClusterName": "c1", "InstanceGroups": [{**{k: g[k] for k in keep}, "InstanceCount": 4}]},
            )
        return original(operation, params, **kw)

    rig.emu.backend.dispatch = dispatch  # type: ignore[method-assign]
    result = rig.engine.act(rig.ref, "stop", transition_id="manual-stop@1")
    assert result.kind == "skip" and "ConflictException" in result.message, result
    assert rig.record().pending is None
    assert rig.outcomes()[0] == "refused"
    assert rig.targets()["dev"] == 4  # the other update stands; ours never went out
    assert {n: s.count for n, s in rig.record().snapshot.sizes.items()} == SIZES


def test_an_update_whose_answer_timed_out_is_decided_from_the_targets(rig: Rig) -> None:
    backend = rig.emu.backend

    def timed_out(request: Any, **_: Any) -> AWSResponse | None:
        target = request.headers.get("X-Amz-Target", b"")
        if b"UpdateCluster" not in (target if isinstance(target, bytes) else target.encode()):
            return None
        backend.dispatch("UpdateCluster", json.loads(request.body))  # it reached AWS and was applied
        raise ReadTimeoutError(endpoint_url=request.url)  # but the answer never came back

    rig.client.meta.events.register_first("before-send.sagemaker.UpdateCluster", timed_out)
    result = rig.engine.act(rig.ref, "stop", transition_id="manual-stop@1")
    assert rig.tally.sent["c1"] == 1, "a timed-out UpdateCluster was sent again"
    assert rig.targets() == {n: 0 for n in SIZES}
    assert result.kind == "sent", result
    assert rig.record().pending.phase == "sent"


def test_reads_and_throttled_updates_are_still_retried(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    # botocore's backoff between attempts (real time.sleep in botocore.endpoint, its only use of time
    # there) is recorded instead of slept: that the calls are retried is the subject, not the pause.
    backoffs: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=backoffs.append))
    failures = Counter({"DescribeCluster": 2, "UpdateCluster": 2})

    def flaky(request: Any, **_: Any) -> AWSResponse | None:
        target = request.headers.get("X-Amz-Target", b"")
        name = (target.decode() if isinstance(target, bytes) else target).split(".")[-1]
        if failures[name] <= 0:
            return None
        failures[name] -= 1
        if name == "DescribeCluster":
            body = b'{"__type": "InternalFailure", "message": "try again"}'
            return AWSResponse(request.url, 500, {}, _Raw(body))
        body = b'{"__type": "ThrottlingException", "message": "Rate exceeded"}'  # refused, never applied
        return AWSResponse(request.url, 400, {}, _Raw(body))

    rig.client.meta.events.register_first("before-send.sagemaker.*", flaky)
    result = rig.engine.act(rig.ref, "stop", transition_id="manual-stop@1")
    assert result.kind == "sent", result
    assert failures == Counter({"DescribeCluster": 0, "UpdateCluster": 0})
    assert rig.tally.sent["c1"] == 1
    assert len(backoffs) == 4  # a pause before each of the four retries


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body

    def read(self, *_: Any) -> bytes:
        body, self._body = self._body, b""
        return body


def test_the_clients_the_cli_builds_never_retry_an_update_blind(rig: Rig) -> None:
    from botocore.exceptions import ClientError

    from hyperpod_scheduler.aws.clients import sagemaker_client

    client = sagemaker_client(
        region="us-east-1", endpoint_url=rig.emu.endpoint, aws_access_key_id="t", aws_secret_access_key="t"
    )
    rig.after_update(lambda: EmulatorError("InternalFailure", "answer lost", 500))
    d = client.describe_cluster(ClusterName="c1")
    g = d["InstanceGroups"][1]
    keep = ("InstanceGroupName", "InstanceType", "ExecutionRole", "SlurmConfig", "LifeCycleConfig")
    with pytest.raises(ClientError, match="InternalFailure"):
        client.update_cluster(ClusterName="c1", InstanceGroups=[{**{k: g[k] for k in keep}, "InstanceCount": 0}])
    assert rig.tally.sent["c1"] == 1
