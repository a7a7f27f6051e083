"""ListClusters, ListClusterNodes paging and filters, tags on cluster ARNs."""

from __future__ import annotations

import pytest

from hyperpod_scheduler.emulator.errors import EmulatorError
from tests.emulator_model.helpers import backend, clock, cluster_request, nodes, wait_status


def test_list_clusters_pages_filters_and_sorts() -> None:
    b = backend()
    for name in ("beta", "alpha", "gamma-1", "gamma-2", "delta"):
        b.dispatch("CreateCluster", cluster_request(name))
        clock(b).advance(60)
    pages, token, seen = 0, None, []
    while True:
        params = {"MaxResults": 2, **({"NextToken": token} if token else {})}
        out = b.dispatch("ListClusters", params)
        seen += [s["ClusterName"] for s in out["ClusterSummaries"]]
        pages += 1
        token = out.get("NextToken")
        if not token:
            break
    assert pages == 3
    assert seen == ["beta", "alpha", "gamma-1", "gamma-2", "delta"]  # oldest first by default
    named = b.dispatch("ListClusters", {"SortBy": "NAME", "SortOrder": "Descending", "NameContains": "gamma"})
    assert [s["ClusterName"] for s in named["ClusterSummaries"]] == ["gamma-2", "gamma-1"]
    summary = named["ClusterSummaries"][0]
    assert set(summary) == {"ClusterArn", "ClusterName", "CreationTime", "ClusterStatus"}
    with pytest.raises(EmulatorError) as err:
        b.dispatch("ListClusters", {"NextToken": "garbage!"})
    assert err.value.code == "ValidationException"


def test_list_cluster_nodes_pages_and_filters_by_group() -> None:
    b = backend()
    b.dispatch("CreateCluster", cluster_request(workers=5))
    wait_status(b, "InService")
    everything = nodes(b, MaxResults=2)
    assert len(everything) == 6 and len({n["InstanceId"] for n in everything}) == 6
    assert {n["InstanceGroupName"] for n in nodes(b, InstanceGroupNameContains="gp")} == {"gpu"}
    assert len(nodes(b, InstanceGroupNameContains="gp")) == 5


def test_tags_on_cluster_arns() -> None:
    b = backend()
    request = {**cluster_request(), "Tags": [{"Key": "schedule", "Value": "office-hours"}]}
    arn = b.dispatch("CreateCluster", request)["ClusterArn"]
    assert b.dispatch("ListTags", {"ResourceArn": arn})["Tags"] == [{"Key": "schedule", "Value": "office-hours"}]
    b.dispatch("AddTags", {"ResourceArn": arn, "Tags": [{"Key": "team", "Value": "ml"}]})
    b.dispatch("DeleteTags", {"ResourceArn": arn, "TagKeys": ["schedule"]})
    assert b.dispatch("ListTags", {"ResourceArn": arn})["Tags"] == [{"Key": "team", "Value": "ml"}]
    with pytest.raises(EmulatorError) as err:
        b.dispatch("ListTags", {"ResourceArn": arn.replace(arn[-12:], "zzzzzzzzzzzz")})
    assert err.value.code == "ResourceNotFound"
