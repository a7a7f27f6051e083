"""A DescribeCluster answer with more instance groups than a cluster can have (1 to 100, the botocore
model's CreateCluster/UpdateCluster bound) is refused in one line naming the count, before any group is
parsed (20,000 groups took a tick 56 s; issue 28, item 14)."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_scheduler.cluster.view import MAX_GROUPS, parse_cluster
from hyperpod_scheduler.errors import MalformedAnswer


def _answer(groups: int, name: str = "g{}") -> dict[str, Any]:
    return {
        "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefghij12",
        "ClusterName": "big",
        "ClusterStatus": "InService",
        "InstanceGroups": [
            {
                "InstanceGroupName": name.format(i),
                "CurrentCount": 1,
                "TargetCount": 1,
                "InstanceType": "ml.g5.xlarge",
                "Status": "InService",
            }
            for i in range(groups)
        ],
    }


def test_the_documented_bound_is_100_groups() -> None:
    assert MAX_GROUPS == 100
    assert len(parse_cluster(_answer(MAX_GROUPS)).groups) == MAX_GROUPS


@pytest.mark.parametrize("count", [MAX_GROUPS + 1, 20_000])
def test_more_groups_than_a_cluster_can_have_is_one_line_naming_the_count(count: int) -> None:
    with pytest.raises(MalformedAnswer) as err:
        parse_cluster(_answer(count))
    message = str(err.value)
    assert f"lists {count:,} instance groups" in message and "at most 100" in message
    assert "\n" not in message and len(message) < 300


def test_a_group_listed_twice_is_named_once_not_every_group() -> None:
    with pytest.raises(MalformedAnswer) as err:
        parse_cluster(_answer(100, name="same"))
    assert "lists group 'same' twice" in str(err.value) and len(str(err.value)) < 200
