"""Endless pagination (issue 28, item 11): every paginated read stops at its page bound, its item bound, or
a token it has seen before, says which, and holds one page in memory at a time."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from hyperpod_scheduler.agent.channel import ChannelError, S3Channel
from hyperpod_scheduler.agent.finder import CheckpointFinder, FinderError
from hyperpod_scheduler.aws import pages
from hyperpod_scheduler.aws.pages import BOUNDS, Bounds, Pages
from hyperpod_scheduler.cluster.view import parse_cluster
from hyperpod_scheduler.config.load import parse_config
from hyperpod_scheduler.cost import fsx, pricelist
from hyperpod_scheduler.engine.fleet import Fleet
from hyperpod_scheduler.engine.look import look
from tests.aws.endless import endless

NOW = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
ARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/{:012d}"


class Calls:
    """A paginated call answering ``answer(n)`` for the n-th call, counting calls."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.sent: list[dict[str, Any]] = []

    def __call__(self, **params: Any) -> Mapping[str, Any]:
        self.sent.append(params)
        return dict(self.answer(len(self.sent) - 1))


def test_a_read_that_ends_is_read_whole_and_not_cut() -> None:
    call = Calls(lambda n: {"Items": [n, n], **({"NextToken": f"t{n}"} if n < 2 else {})})
    read = Pages(call, "ListThings", "Items", bounds=Bounds(pages=10, items=100), Name="x")
    assert list(read) == [0, 0, 1, 1, 2, 2] and read.cut is None
    assert call.sent == [{"Name": "x"}, {"Name": "x", "NextToken": "t0"}, {"Name": "x", "NextToken": "t1"}]


def test_a_new_token_every_page_stops_at_the_page_bound_and_says_so() -> None:
    call = Calls(lambda n: {"Items": [n], "NextToken": f"t{n}"})
    read = Pages(call, "ListThings", "Items", bounds=Bounds(pages=5, items=100))
    assert list(read) == [0, 1, 2, 3, 4] and len(call.sent) == 5
    assert read.cut is not None and read.cut.startswith("ListThings: ") and "5 pages" in read.cut
    assert "\n" not in read.cut


def test_the_item_bound_ends_a_read_mid_page() -> None:
    call = Calls(lambda n: {"Items": [n] * 3, "NextToken": f"t{n}"})
    read = Pages(call, "ListThings", "Items", bounds=Bounds(pages=100, items=7))
    assert len(list(read)) == 7 and len(call.sent) == 3
    assert read.cut is not None and "7 items" in read.cut


def test_a_token_seen_before_ends_the_read() -> None:
    call = Calls(lambda n: {"Items": [n], "NextToken": "ab"[n % 2]})
    read = Pages(call, "ListThings", "Items", bounds=Bounds(pages=100, items=100))
    assert list(read) == [0, 1, 2] and len(call.sent) == 3
    assert read.cut is not None and "same NextToken" in read.cut


def test_every_bound_is_a_real_figure() -> None:
    for operation in ("ListClusters", "ListTags", "ListClusterNodes", "ListClusterEvents", "GetProducts"):
        assert BOUNDS[operation].pages >= 10 and BOUNDS[operation].items >= 1_000
    assert {"DescribeFileSystems", "ListObjectsV2"} <= set(BOUNDS)


def _client(service: str, url: str) -> Any:
    return boto3.client(
        service, endpoint_url=url, region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t"
    )


def _sagemaker(url: str) -> Any:
    return _client("sagemaker", url)


def _summary(n: int) -> dict[str, Any]:
    return {
        "ClusterName": f"c{n}",
        "ClusterArn": ARN.format(n),
        "ClusterStatus": "InService",
        "CreationTime": 1_700_000_000,
    }


TAGGED = {"Tags": [{"Key": "hyperpod-scheduler:schedule", "Value": "office"}]}
CONFIG = {
    "schedules": {"office": "Mon-Fri 08:00-18:00 UTC"},
    "targets": [{"region": "us-east-1", "tag_selector": True}],
}


def test_discovery_by_tag_stops_at_the_list_clusters_bound_and_says_so() -> None:
    with endless({"ListClusters": lambda n: {"ClusterSummaries": [_summary(n)]}}) as server:
        client = _sagemaker(server.url)
        client.meta.events.register(
            "after-call.sagemaker.ListTags", lambda parsed, **kw: parsed.pop("NextToken", None)
        )  # the tags themselves end; only the cluster list is endless
        server.pages["ListTags"] = lambda n: TAGGED
        fleet = Fleet(parse_config(CONFIG), lambda ref: client)
        governed = fleet.governed()
    limit = BOUNDS["ListClusters"].pages
    assert server.served["ListClusters"] == limit  # not one call more
    assert len(governed) == limit  # the clusters read are governed
    (problem,) = fleet.problems
    assert problem.where.startswith("targets[0]") and "ListClusters" in problem.why and f"{limit} pages" in problem.why


def test_endless_tags_skip_that_cluster_naming_list_tags() -> None:
    answer = {"ClusterSummaries": [_summary(1)]}
    with endless({"ListClusters": lambda n: answer, "ListTags": lambda n: TAGGED}) as server:
        client = _sagemaker(server.url)
        client.meta.events.register(
            "after-call.sagemaker.ListClusters", lambda parsed, **kw: parsed.pop("NextToken", None)
        )
        fleet = Fleet(parse_config(CONFIG), lambda ref: client)
        assert fleet.governed() == []
    assert server.served["ListTags"] == BOUNDS["ListTags"].pages
    (problem,) = fleet.problems
    assert problem.cluster == "c1" and "cannot read its tags: ListTags" in problem.why


def test_a_look_at_endless_nodes_keeps_the_nodes_read_and_says_the_bound() -> None:
    view = parse_cluster(
        {
            "ClusterArn": ARN.format(1),
            "ClusterName": "c1",
            "ClusterStatus": "InService",
            "InstanceGroups": [
                {"InstanceGroupName": "gpu", "CurrentCount": 1, "TargetCount": 1, "InstanceType": "ml.p5.48xlarge"}
            ],
        }
    )
    node = {
        "InstanceGroupName": "gpu",
        "InstanceId": "i-0",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceStatus": {"Status": "Running"},
        "LaunchTime": 1_700_000_000,
    }
    with endless({"ListClusterNodes": lambda n: {"ClusterNodeSummaries": [node] * 100}}) as server:
        seen = look(_sagemaker(server.url), view, NOW, NOW)
    bound = BOUNDS["ListClusterNodes"]
    assert server.served["ListClusterNodes"] == bound.items // 100
    assert seen.nodes is not None and len(seen.nodes) == bound.items
    assert f"ListClusterNodes: stopped after {bound.pages} pages" in seen.note


def _product(n: int, pad: int) -> str:
    return json.dumps(
        {
            "product": {
                "attributes": {
                    "instanceName": f"ml.p5.{n}xlarge",
                    "usagetype": f"USE1-Cluster:ml.p5.{n}xlarge",
                    "padding": "x" * pad,
                }
            },
            "terms": {"OnDemand": {"t": {"priceDimensions": {"d": {"unit": "Hrs", "pricePerUnit": {"USD": "1.5"}}}}}},
        }
    )


def test_prices_read_an_endless_price_list_one_page_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # 24 pages of ~400 KB each: kept whole (as before) that is 10 MB a service; page by page, one page's worth.
    monkeypatch.setitem(pages.BOUNDS, "GetProducts", Bounds(pages=24, items=100_000))
    page = {"FormatVersion": "aws_v1", "PriceList": [_product(i, 4_000) for i in range(100)]}
    with endless({"GetProducts": lambda n: page}, give_up=60) as server:
        client = boto3.client(
            "pricing",
            endpoint_url=server.url,
            region_name="us-east-1",
            aws_access_key_id="t",
            aws_secret_access_key="t",
        )
        notes: list[str] = []
        tracemalloc.start()
        try:
            table = pricelist.fetch(client, "us-east-1", NOW, notes)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert server.served["GetProducts"] == 48  # 24 pages for SageMaker, 24 for FSx: then it stopped
    assert table.instance_hourly["ml.p5.1xlarge"].usd == 1.5
    assert len(notes) == 2 and all("GetProducts: stopped after 24 pages" in n for n in notes)
    assert peak < 6 * 2**20, f"{peak / 2**20:.1f} MiB"


def test_file_systems_read_until_a_repeated_token_and_say_so() -> None:
    lustre = {"FileSystemId": "fs-0123456789abcdef0", "FileSystemType": "LUSTRE", "StorageCapacity": 1200}
    with endless({"DescribeFileSystems": lambda n: {"FileSystems": [lustre]}}, repeat=True) as server:
        client = _client("fsx", server.url)
        notes: list[str] = []
        listed = fsx.list_file_systems(client, notes=notes)
    assert len(listed) == 2 and server.served["DescribeFileSystems"] == 2
    assert len(notes) == 1 and "DescribeFileSystems: the same NextToken" in notes[0]


class EndlessS3:
    def __init__(self) -> None:
        self.calls = 0

    def list_objects_v2(self, **params: Any) -> dict[str, Any]:
        self.calls += 1
        key = f"p/c{self.calls}/intent.json"
        return {"Contents": [{"Key": key, "LastModified": NOW}], "NextContinuationToken": f"t{self.calls}"}


@pytest.fixture
def s3() -> Iterator[EndlessS3]:
    yield EndlessS3()


def test_the_agent_channel_refuses_an_endless_listing_naming_the_bound(s3: EndlessS3) -> None:
    with pytest.raises(ChannelError) as err:
        S3Channel("b", "p", s3).clusters()
    assert s3.calls == BOUNDS["ListObjectsV2"].pages and "ListObjectsV2: stopped after" in str(err.value)


def test_the_checkpoint_finder_refuses_an_endless_listing_naming_the_bound(s3: EndlessS3) -> None:
    with pytest.raises(FinderError) as err:
        CheckpointFinder(lambda: s3).newest("s3://b/p/")
    assert s3.calls == BOUNDS["ListObjectsV2"].pages and "ListObjectsV2: stopped after" in str(err.value)
