"""Fuzzed AWS answers, generated from botocore's output shapes and then broken, fed through a real boto3
client (its parser and our raw checks, with only the HTTP exchange replaced): the call returns an answer
or raises one of the documented error kinds with a one-line message, the engine turns a bad
DescribeCluster answer into an error for that cluster only, and a recorded size is never lost."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import BotoCoreError, ClientError
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_scheduler.aws import deadlines
from hyperpod_scheduler.aws.clients import sagemaker_client, session
from hyperpod_scheduler.aws.deadlines import Deadlines, _Buffered
from hyperpod_scheduler.cluster.view import parse_cluster
from hyperpod_scheduler.engine.fleet import Governed, ref_for, tick
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.memory import MemoryStore
from hyperpod_scheduler.store.records import ClusterRecord, GroupSize, Snapshot
from tests.fuzz.budget import bounded, examples
from tests.fuzz.strategies import broken, damaged_bytes, encode, from_shape

T0 = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)
REF = ref_for("c1", "us-east-1")
ROLE = "arn:aws:iam::123456789012:role/fuzz"
# Mostly answers; now and then an error status with the same (damaged) body: error bodies are parsed too.
STATUSES = st.sampled_from([200] * 6 + [302, 400, 404, 409, 429, 500, 503])
ALLOWED = (HyperpodSchedulerError, BotoCoreError, ClientError)  # what the CLI and the engine turn into lines


class Canned:
    """A before-send handler: whatever the client asks, this status and body come back."""

    def __init__(self) -> None:
        self.body = b"{}"
        self.status = 200

    def __call__(self, request: Any, **_: Any) -> AWSResponse:
        headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": "fuzz"}
        return AWSResponse(request.url, self.status, headers, _Buffered(self.body))


@pytest.fixture(scope="module")
def canned() -> Canned:
    return Canned()


@pytest.fixture(scope="module")
def clients(canned: Canned) -> dict[str, Any]:
    """Real clients as the product builds them (bound and watched); the network is never reached."""
    env = {"aws_access_key_id": "t", "aws_secret_access_key": "t"}
    deadlines.use(Deadlines(total_s=2))  # a fuzzed 5xx is not retried for seconds
    built = {
        "sagemaker": sagemaker_client(region="us-east-1", endpoint_url="http://fuzz.invalid", **env),
        "fsx": session(region="us-east-1").client("fsx", endpoint_url="http://fuzz.invalid", **env),
        "pricing": session(region="us-east-1").client("pricing", endpoint_url="http://fuzz.invalid", **env),
    }
    deadlines.use(None)
    for client in built.values():
        client.meta.events.register_first("before-send", canned)
    return built


# (client, method, operation, arguments): every call the product makes whose answer it reads.
CALLS = [
    ("sagemaker", "describe_cluster", "DescribeCluster", {"ClusterName": "c1"}),
    ("sagemaker", "list_clusters", "ListClusters", {}),
    ("sagemaker", "list_tags", "ListTags", {"ResourceArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/a"}),
    ("sagemaker", "list_cluster_nodes", "ListClusterNodes", {"ClusterName": "c1"}),
    ("sagemaker", "describe_cluster_node", "DescribeClusterNode", {"ClusterName": "c1", "NodeId": "i-1"}),
    ("sagemaker", "list_cluster_events", "ListClusterEvents", {"ClusterName": "c1"}),
    (
        "sagemaker",
        "update_cluster",
        "UpdateCluster",
        {
            "ClusterName": "c1",
            "InstanceGroups": [{"InstanceGroupName": "g", "InstanceCount": 0, "ExecutionRole": ROLE}],
        },
    ),
    ("fsx", "describe_file_systems", "DescribeFileSystems", {}),
    ("pricing", "get_products", "GetProducts", {"ServiceCode": "AmazonSageMaker"}),
]


def _answers(client: str, operation: str) -> st.SearchStrategy[bytes]:
    from hyperpod_scheduler.aws.clients import session as make

    model = make(region="us-east-1").client(client).meta.service_model.operation_model(operation)
    assert model.output_shape is not None
    good = from_shape(model.output_shape)
    return st.one_of(good, broken(good)).map(encode).flatmap(damaged_bytes)


def _one_line(exc: BaseException) -> None:
    text = str(exc)
    assert text.strip() and "\n" not in text.strip() and "Traceback" not in text, repr(text)


@pytest.mark.parametrize(("client", "method", "operation", "params"), CALLS, ids=[c[2] for c in CALLS])
def test_every_answer_is_read_or_refused_in_one_line(
    clients: dict[str, Any], canned: Canned, client: str, method: str, operation: str, params: dict[str, Any]
) -> None:
    @examples(12)
    @given(_answers(client, operation), STATUSES)
    def check(body: bytes, status: int) -> None:
        canned.body, canned.status = body, status
        try:
            answer = bounded(lambda: getattr(clients[client], method)(**params), f"{operation} on {body[:60]!r}")
        except ALLOWED as exc:
            _one_line(exc)
            return
        assert isinstance(answer, dict)

    check()


def _record() -> ClusterRecord:
    sizes = {n: GroupSize(count=c, min_count=None, instance_type=None) for n, c in {"a": 2, "b": 3}.items()}
    snap = Snapshot(taken_at=T0 - timedelta(hours=2), sizes=sizes, transition_id="stop@x", reason="stop")
    return ClusterRecord.new(REF.key, T0).evolve(
        snapshot=snap, applied_state="stopped", applied_transition_at=T0 - timedelta(hours=2)
    )


DESCRIBE = _answers("sagemaker", "DescribeCluster")


@examples(40)
@given(DESCRIBE, st.sampled_from(["stopped", "running"]), STATUSES)
def test_a_fuzzed_describe_answer_is_a_result_for_its_cluster_and_keeps_the_sizes(
    clients: dict[str, Any], canned: Canned, body: bytes, desired: str, status: int
) -> None:
    canned.body, canned.status = body, status
    store = MemoryStore()
    before = store.put(_record(), expected_version=None)
    engine = Engine(store, lambda _ref: clients["sagemaker"], lambda: T0, sleep=lambda _s: None)
    # Through the fleet's tick, as every face runs a turn: a failure of the cluster's own is its result.
    governed = Governed(REF, desired, resolve("always" if desired == "running" else "never", {}), True)
    result = bounded(lambda: tick(engine, [governed], T0)[0], "reconcile")
    assert "\n" not in result.message and "Traceback" not in result.message
    after = store.get(REF.key)
    assert after is not None and after.snapshot is not None
    if desired == "running":  # a stopped cluster with recorded sizes: whatever came back, they stay
        assert after.snapshot == before.snapshot
    try:
        view = parse_cluster(clients["sagemaker"].describe_cluster(ClusterName="c1"))
    except ALLOWED as exc:
        _one_line(exc)
        assert result.kind in ("error", "skip", "refused"), result
        return
    assert view.name
