"""Reading a DescribeCluster answer: a summary for people and the configuration it implies."""

from __future__ import annotations

import copy

from botocore.validate import ParamValidator

from hyperpod_scheduler.aws.model import operation_model, validate_request
from hyperpod_scheduler.cluster.describe import (
    group_count,
    group_request_from_details,
    request_from_describe,
    summarize_groups,
)
from hyperpod_scheduler.cluster.render import render_create_request, spec_from_request
from hyperpod_scheduler.cluster.spec import parse_yaml, spec_from_dict
from hyperpod_scheduler.cluster.tiers import Tier
from tests.cluster.cluster_specs import ARN, BUCKET, ROLE, describe_answer, example_text


def test_fixture_is_a_valid_describe_answer() -> None:
    # Guards the other tests: they read an answer the real service could send.
    shape = operation_model("DescribeCluster").output_shape
    assert shape is not None
    assert not ParamValidator().validate(describe_answer(), shape).has_errors()


def test_group_count_prefers_the_target() -> None:
    assert group_count({"CurrentCount": 1, "TargetCount": 4}) == 4
    assert group_count({"CurrentCount": 3}) == 3
    assert group_count({}) == 0


def test_group_request_keeps_lifecycle_exactly_as_it_was() -> None:
    groups = describe_answer()["InstanceGroups"]
    assert "LifeCycleConfig" not in group_request_from_details(groups[0])  # AMI stays AMI
    assert group_request_from_details(groups[1])["LifeCycleConfig"] == {
        "SourceS3Uri": BUCKET,
        "OnInitComplete": "extra.sh",
    }
    assert group_request_from_details(groups[2])["LifeCycleConfig"] == {
        "SourceS3Uri": BUCKET,
        "OnCreate": "on_create.sh",
    }


def test_group_request_carries_what_an_update_must_repeat() -> None:
    gpu = group_request_from_details(describe_answer()["InstanceGroups"][2])
    assert gpu == {
        "InstanceGroupName": "gpu",
        "InstanceType": "ml.g5.8xlarge",
        "InstanceCount": 4,
        "ExecutionRole": ROLE,
        "ThreadsPerCore": 2,
        "LifeCycleConfig": {"SourceS3Uri": BUCKET, "OnCreate": "on_create.sh"},
        "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
        "SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["gpu"]},
    }


def test_controller_min_count_and_no_image_change() -> None:
    controller = group_request_from_details(describe_answer()["InstanceGroups"][0])
    assert controller["MinInstanceCount"] == 1
    assert controller["SlurmConfig"] == {"NodeType": "Controller"}  # an empty partition list is dropped
    assert "ImageId" not in controller


def test_request_from_describe_is_a_valid_create_request() -> None:
    request = request_from_describe(describe_answer())
    assert request["ClusterName"] == "demo"
    assert request["NodeRecovery"] == "Automatic"
    assert request["Orchestrator"] == {"Slurm": {}}
    assert validate_request("CreateCluster", request) == []


def test_summary_rows() -> None:
    rows = {r.name: r for r in summarize_groups(describe_answer())}
    assert [r.tier for r in rows.values()] == [Tier.AMI, Tier.AMI_EXTENSION, Tier.CUSTOM]
    gpu = rows["gpu"]
    assert (gpu.current, gpu.target, gpu.minimum, gpu.status) == (1, 4, None, "Updating")
    assert (gpu.node_type, gpu.partition) == ("Compute", "gpu")
    assert rows["controller"].as_dict()["tier"] == "ami"


def test_a_cluster_created_from_a_spec_describes_back_to_the_same_request() -> None:
    request = render_create_request(spec_from_dict(parse_yaml(example_text("slurm"))))
    # What DescribeCluster would say about it: the same group settings plus counts and status.
    answer = copy.deepcopy({k: v for k, v in request.items() if k != "Tags"})
    for g in answer["InstanceGroups"]:
        count = g.pop("InstanceCount")
        g.update(CurrentCount=count, TargetCount=count, Status="InService")
    answer.update(ClusterArn=ARN, ClusterStatus="InService")
    again = render_create_request(spec_from_request(request_from_describe(answer)))
    assert again == {k: v for k, v in request.items() if k != "Tags"}
