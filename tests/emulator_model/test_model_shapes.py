"""Every answer fits its botocore output shape; the check that says so catches what it should."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from hyperpod_scheduler.emulator.protocol import AnswerShapeError, check_answer
from hyperpod_scheduler.emulator.shapes import answer_problems, request_problems
from tests.emulator_model.helpers import backend, cluster_request, events, groups, nodes, resend, run_until, wait_status

PLAN = {"instance_type": "ml.p5.48xlarge", "count": 2, "start": "+0s", "duration_hours": 48}


def test_every_operation_answers_in_its_output_shape() -> None:
    # The helpers' backend checks every answer (the protocol's check mode): any misfit raises.
    b = backend(seed=1, capacity={"training_plans": {"reserved": PLAN}})
    request = cluster_request(
        continuous=True,
        login=True,
        tier="extension",
        OnStartDeepHealthChecks=["InstanceStress"],
        ThreadsPerCore=1,
        InstanceStorageConfigs=[{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
        AutoPatchConfig={"PatchingStrategy": "WhenIdle"},
    )
    request["VpcConfig"] = {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]}
    request["NodeRecovery"] = "Automatic"
    request["Tags"] = [{"Key": "k", "Value": "v"}]
    arn = b.dispatch("CreateCluster", request)["ClusterArn"]
    b.dispatch("DescribeCluster", {"ClusterName": "demo"})  # while Creating
    b.dispatch("ListClusterNodes", {"ClusterName": "demo", "IncludeNodeLogicalIds": True})
    wait_status(b, "InService")
    b.dispatch(
        "BatchAddClusterNodes",
        {"ClusterName": "demo", "NodesToAdd": [{"InstanceGroupName": "nope", "IncrementTargetCountBy": 1}]},
    )
    run_until(b, lambda: groups(b)["gpu"]["Status"] == "InService")
    add = b.dispatch(
        "BatchAddClusterNodes",
        {"ClusterName": "demo", "NodesToAdd": [{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}]},
    )
    b.dispatch("DescribeClusterNode", {"ClusterName": "demo", "NodeLogicalId": add["Successful"][0]["NodeLogicalId"]})
    described = b.dispatch("DescribeCluster", {"ClusterName": arn})
    listed = nodes(b, IncludeNodeLogicalIds=True)
    worker = next(n["InstanceId"] for n in listed if n["InstanceGroupName"] == "gpu")
    b.dispatch("DescribeClusterNode", {"ClusterName": "demo", "NodeId": worker})
    b.dispatch("BatchDeleteClusterNodes", {"ClusterName": "demo", "NodeIds": [worker, "i-0123456789abcdef0"]})
    b.dispatch("BatchDeleteClusterNodes", {"ClusterName": "demo", "NodeIds": ["i-0123456789abcdef0"]})
    run_until(b, lambda: not [n for n in nodes(b) if n["InstanceStatus"]["Status"] != "Running"])
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(described, {"gpu": 1})})
    for ev in events(b):
        b.dispatch("DescribeClusterEvent", {"ClusterName": "demo", "EventId": ev["EventId"]})
    for op in b.dispatch("ListClusterOperations", {"ClusterName": "demo"})["ClusterOperationSummaries"]:
        b.dispatch("DescribeClusterOperation", {"ClusterName": "demo", "OperationId": op["OperationId"]})
    b.dispatch("ListClusters", {"MaxResults": 1})
    b.dispatch("ListTags", {"ResourceArn": arn})
    b.dispatch("AddTags", {"ResourceArn": arn, "Tags": [{"Key": "a", "Value": "b"}]})
    b.dispatch("DeleteTags", {"ResourceArn": arn, "TagKeys": ["a"]})
    b.dispatch("ListTrainingPlans", {})
    b.dispatch("DescribeTrainingPlan", {"TrainingPlanName": "reserved"})
    b.dispatch("DeleteCluster", {"ClusterName": "demo"})
    b.dispatch("DescribeCluster", {"ClusterName": "demo"})


def test_default_mode_failure_responses_fit_too() -> None:
    b = backend(seed=2, capacity={"instance_types": {"ml.p5.48xlarge": 0}})
    b.dispatch("CreateCluster", cluster_request(worker_type="ml.p5.48xlarge"))
    failed = wait_status(b, "Failed")
    assert answer_problems("DescribeCluster", failed) == []
    assert b.dispatch("ListClusterOperations", {"ClusterName": "demo"})["ClusterOperationSummaries"]


NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("operation", "answer", "needle"),
    [
        ("BatchDeleteClusterNodes", {"Successful": [], "Failed": []}, "Successful: 0 items, at least 1"),
        (
            "ListClusterNodes",
            {
                "ClusterNodeSummaries": [
                    {
                        "InstanceGroupName": "gpu",
                        "InstanceId": "i-0123456789abcdef0",
                        "InstanceType": "ml.p5.48xlarge",
                        "LaunchTime": NOW,
                        "InstanceStatus": {"Status": "Running"},
                        "PrivateDnsHostname": "ip-10-1-2-3",
                    }
                ]
            },
            "PrivateDnsHostname: value 'ip-10-1-2-3' does not match",
        ),
        ("DescribeCluster", {"ClusterArn": "x", "ClusterStatus": "InService"}, "InstanceGroups: required"),
        ("DescribeCluster", {"ClusterArn": "x", "ClusterStatus": "Nope", "InstanceGroups": []}, "unknown value 'Nope'"),
        ("ListClusters", {"ClusterSummaries": [], "Extra": 1}, "Extra: not a member"),
        ("ListClusterEvents", {"Events": [{"EventTime": "yesterday"}]}, "EventTime: expected an aware datetime"),
        ("DescribeClusterOperation", {"DeepHealthCheckDetails": []}, "0 items, at least 1"),
    ],
)
def test_the_answer_check_catches_what_the_model_forbids(operation: str, answer: dict[str, Any], needle: str) -> None:
    found = answer_problems(operation, answer)
    assert any(needle in p for p in found), found
    with pytest.raises(AnswerShapeError):
        check_answer(operation, answer)


def test_request_validation_adds_enums_patterns_and_maximums_to_param_validator() -> None:
    group = {"InstanceGroupName": "gpu", "InstanceType": "ml.p5.huge", "InstanceCount": 7000, "ExecutionRole": "r"}
    found = request_problems("CreateCluster", {"ClusterName": "-bad-", "InstanceGroups": [group]})
    text = "\n".join(found)
    assert "unknown value 'ml.p5.huge'" in text  # enum (ParamValidator skips it)
    assert "7000 is above the maximum 6758" in text  # maximum
    assert "'-bad-' does not match the pattern" in text  # pattern
    assert "ExecutionRole" in text  # minimum length, from ParamValidator
    assert request_problems("ListClusters", {}) == []
