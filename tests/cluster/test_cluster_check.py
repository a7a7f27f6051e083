"""`check_spec`: the HyperPod rules applied to a spec, each problem pointing at what the user wrote."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_scheduler.cluster.check import check_spec, spec_field
from hyperpod_scheduler.cluster.spec import parse_yaml, spec_from_dict
from hyperpod_scheduler.cluster.tiers import Tier
from hyperpod_scheduler.errors import SpecError
from tests.cluster.cluster_specs import BUCKET, example_text, slurm_spec


def _errors(data: dict[str, Any]) -> list[str]:
    return [str(p) for p in check_spec(spec_from_dict(data)).errors]


def _warnings(data: dict[str, Any]) -> list[str]:
    return [str(p) for p in check_spec(spec_from_dict(data)).warnings]


@pytest.mark.parametrize("kind", ["slurm", "eks"])
def test_shipped_examples_are_clean(kind: str) -> None:
    report = check_spec(spec_from_dict(parse_yaml(example_text(kind))))
    assert report.problems == []
    assert report.ok


def test_tiers_are_reported_per_group() -> None:
    data = slurm_spec()
    data["instance_groups"][0]["lifecycle"] = {"source_s3_uri": BUCKET, "on_create": "c.sh"}
    data["instance_groups"][1]["lifecycle"] = {"source_s3_uri": BUCKET, "on_init_complete": "e.sh"}
    tiers = check_spec(spec_from_dict(data)).tiers()
    assert tiers == {"controller": Tier.CUSTOM, "login": Tier.AMI_EXTENSION, "gpu": Tier.AMI}


def _with(group: int, **fields: Any) -> dict[str, Any]:
    data = slurm_spec()
    data["instance_groups"][group].update(fields)
    return data


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            _with(1, lifecycle={"source_s3_uri": BUCKET, "on_create": "a.sh", "on_init_complete": "b.sh"}),
            (
                "error: group 'login' instance_groups[1].lifecycle.on_create: OnCreate and "
                "OnInitComplete are mutually exclusive"
            ),
        ),
        (
            _with(1, lifecycle={"on_init_complete": "b.sh"}),
            (
                "error: group 'login' instance_groups[1].lifecycle.source_s3_uri: incomplete: "
                "OnInitComplete is set but SourceS3Uri is missing"
            ),
        ),
        (
            _with(1, lifecycle={"source_s3_uri": BUCKET}),
            (
                "error: group 'login' instance_groups[1].lifecycle.on_create: incomplete: SourceS3Uri is "
                "set but neither OnCreate nor OnInitComplete"
            ),
        ),
        (
            _with(1, lifecycle={}),
            (
                "error: group 'login' instance_groups[1].lifecycle: the LifeCycleConfig block is empty; "
                "omit it for AMI-based configuration"
            ),
        ),
        (
            _with(2, instance_type="ml.p9.huge"),
            "error: group 'gpu' instance_groups[2].instance_type: unknown value 'ml.p9.huge'",
        ),
        (
            _with(2, slurm={"node_type": "Compute"}),
            ("error: group 'gpu' instance_groups[2].slurm.partition: required on Compute groups (one partition name)"),
        ),
        (
            _with(1, slurm={"node_type": "Login", "partition": "x"}),
            (
                "error: group 'login' instance_groups[1].slurm.partition: partitions are only allowed on "
                "Compute groups, not Login"
            ),
        ),
        (
            _with(1, slurm={"node_type": "Controller"}),
            (
                "error: instance_groups[].slurm.node_type: the cluster must have exactly one group with "
                "NodeType Controller (found 'controller', 'login')"
            ),
        ),
        (
            _with(2, slurm=None),
            (
                "error: group 'gpu' instance_groups[2].slurm: missing: when any group has SlurmConfig, "
                "every group needs one"
            ),
        ),
        (
            _with(2, name="controller"),
            "error: group 'controller' instance_groups[0].name: duplicate group name (2 groups)",
        ),
        (
            _with(2, min_count=3),
            ("error: group 'gpu' instance_groups[2].min_count: MinInstanceCount 3 is greater than InstanceCount 2"),
        ),
        (
            _with(2, count=7000),
            "error: group 'gpu' instance_groups[2].count: value 7000 is above the maximum 6758",
        ),
        (
            slurm_spec(node_provisioning_mode="Continuous", slurm_config_strategy="Managed"),
            "error: slurm_config_strategy: must not be sent in Continuous mode (it runs in merge mode only)",
        ),
        (
            slurm_spec(node_recovery="Sometimes"),
            "error: node_recovery: unknown value 'Sometimes' (allowed: Automatic, None)",
        ),
        (
            slurm_spec(name="bad_name!"),
            "error: name: value 'bad_name!' does not match the pattern",
        ),
    ],
)
def test_each_rule_names_the_spec_field(data: dict[str, Any], expected: str) -> None:
    errors = _errors(data)
    assert any(e.startswith(expected) for e in errors), errors


def test_a_value_inherited_from_defaults_is_blamed_on_defaults() -> None:
    data = slurm_spec()
    data["defaults"]["lifecycle"] = {"source_s3_uri": BUCKET, "on_create": "a.sh", "on_init_complete": "b.sh"}
    data["instance_groups"][2]["lifecycle"] = "ami"
    errors = _errors(data)
    assert errors == [
        ("error: group 'controller' defaults.lifecycle.on_create: OnCreate and OnInitComplete are mutually exclusive"),
        ("error: group 'login' defaults.lifecycle.on_create: OnCreate and OnInitComplete are mutually exclusive"),
    ]


def test_one_bad_value_is_one_error_even_when_two_checks_catch_it() -> None:
    assert _errors(_with(2, count=-1)) == [
        "error: group 'gpu' instance_groups[2].count: Invalid value for parameter "
        "InstanceGroups[2].InstanceCount, "
        "value: -1, valid min value: 0"
    ]


def test_missing_execution_role_is_an_error_on_the_group() -> None:
    data = slurm_spec(defaults={})
    errors = _errors(data)
    assert len(errors) == 3
    assert errors[0].startswith(
        "error: group 'controller' instance_groups[0].execution_role: Missing required parameter"
    )


def test_eks_needs_on_create_on_every_group() -> None:
    data = slurm_spec(orchestrator="eks", eks_cluster_arn="arn:aws:eks:us-east-1:123456789012:cluster/k")
    for g in data["instance_groups"]:
        del g["slurm"]
    data["instance_groups"][0]["lifecycle"] = {"source_s3_uri": BUCKET, "on_create": "c.sh"}
    data["instance_groups"][1]["lifecycle"] = {"source_s3_uri": BUCKET, "on_init_complete": "e.sh"}
    assert _errors(data) == [
        (
            "error: group 'login' instance_groups[1].lifecycle.on_create: EKS clusters need OnCreate "
            "(optional lifecycle is Slurm-only)"
        ),
        (
            "error: group 'gpu' instance_groups[2].lifecycle: EKS clusters need a LifeCycleConfig with "
            "SourceS3Uri and OnCreate"
        ),
    ]


def test_problems_in_passed_through_fields_point_into_api() -> None:
    data = _with(2, api={"ScheduledUpdateConfig": {"ScheduleExpression": 5}})
    errors = _errors(data)
    assert len(errors) == 1
    assert errors[0].startswith("error: group 'gpu' instance_groups[2].api.ScheduledUpdateConfig.ScheduleExpression:")


def test_warnings_do_not_make_a_spec_invalid() -> None:
    data = _with(1, lifecycle={"source_s3_uri": "s3://my-bucket/lcc/", "on_init_complete": "e.sh"})
    report = check_spec(spec_from_dict(data))
    assert report.ok
    assert [str(p) for p in report.warnings] == [
        "warning: group 'login' instance_groups[1].lifecycle.source_s3_uri: 's3://my-bucket/lcc/' "
        "does not start "
        "with 's3://sagemaker-'; the managed instance role policy only reads buckets with that prefix"
    ]


def test_raise_for_errors_carries_every_error() -> None:
    report = check_spec(spec_from_dict(_with(2, count=-1, instance_type="ml.p9.huge")))
    with pytest.raises(SpecError) as info:
        report.raise_for_errors("x.yaml")
    assert len(info.value.problems) == 2
    assert str(info.value).startswith("x.yaml: ")


@pytest.mark.parametrize(
    ("api_field", "expected"),
    [
        ("ClusterName", "name"),
        ("InstanceGroups", "instance_groups"),
        ("InstanceGroups[2]", "instance_groups[2]"),
        ("InstanceGroups[0].SlurmConfig.PartitionNames", "instance_groups[0].slurm.partition"),
        ("InstanceGroups[0].SlurmConfig.PartitionNames[0]", "instance_groups[0].slurm.partition[0]"),
        ("InstanceGroups[1].InstanceStorageConfigs[0].EbsVolumeConfig", "instance_groups[1].ebs_volume_gb"),
        ("InstanceGroups[0].CapacityRequirements", "instance_groups[0].api.CapacityRequirements"),
        ("VpcConfig.Subnets[0]", "vpc.subnets[0]"),
        ("Orchestrator.Slurm.SlurmConfigStrategy", "slurm_config_strategy"),
        ("TieredStorageConfig.Mode", "TieredStorageConfig.Mode"),
    ],
)
def test_spec_field_translation(api_field: str, expected: str) -> None:
    assert spec_field(api_field, spec_from_dict(slurm_spec())) == expected


def test_passed_through_keys_are_located_in_their_api_block() -> None:
    data = slurm_spec(api={"ClusterRole": "arn:aws:iam::123456789012:role/c", "TieredStorageConfig": {}})
    data["instance_groups"][1]["api"] = {"InstanceStorageConfigs": [{"EbsVolumeConfig": {}}]}
    spec = spec_from_dict(data)
    assert spec_field("ClusterRole", spec) == "api.ClusterRole"
    assert spec_field("TieredStorageConfig.Mode", spec) == "api.TieredStorageConfig.Mode"
    assert (
        spec_field("InstanceGroups[1].InstanceStorageConfigs[0].EbsVolumeConfig", spec)
        == "instance_groups[1].api.InstanceStorageConfigs[0].EbsVolumeConfig"
    )
