"""What a spec becomes on the wire: the CreateCluster request."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.aws.model import validate_request
from hyperpod_scheduler.cluster.render import render_create_request, spec_from_request
from hyperpod_scheduler.cluster.spec import parse_yaml, spec_from_dict
from hyperpod_scheduler.cluster.tiers import Tier, tier_of
from hyperpod_scheduler.errors import SpecError
from tests.cluster.cluster_specs import BUCKET, ROLE, example_text, slurm_spec


def _render(data: dict[str, Any]) -> dict[str, Any]:
    return render_create_request(spec_from_dict(data))


def _groups(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["InstanceGroupName"]: g for g in request["InstanceGroups"]}


@pytest.mark.parametrize("kind", ["slurm", "eks"])
def test_examples_render_to_requests_the_api_model_accepts(kind: str) -> None:
    request = render_create_request(spec_from_dict(parse_yaml(example_text(kind))))
    assert validate_request("CreateCluster", request) == []


def test_a_group_renders_field_by_field() -> None:
    data = slurm_spec()
    data["instance_groups"][2].update(
        min_count=1,
        threads_per_core=2,
        ebs_volume_gb=500,
        deep_health_checks=["InstanceStress"],
        training_plan_arn="arn:aws:sagemaker:us-east-1:123456789012:training-plan/p1",
        override_vpc={"security_group_ids": ["sg-1"], "subnets": ["subnet-1"]},
    )
    assert _groups(_render(data))["gpu"] == {
        "InstanceGroupName": "gpu",
        "InstanceCount": 2,
        "MinInstanceCount": 1,
        "InstanceType": "ml.g5.8xlarge",
        "ExecutionRole": ROLE,
        "ThreadsPerCore": 2,
        "TrainingPlanArn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p1",
        "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
        "OnStartDeepHealthChecks": ["InstanceStress"],
        "SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["gpu"]},
        "OverrideVpcConfig": {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]},
    }


def test_cluster_level_fields() -> None:
    request = _render(
        slurm_spec(
            tags={"team": "ml", "env": "dev"},
            node_recovery="Automatic",
            node_provisioning_mode="Continuous",
            vpc={"security_group_ids": ["sg-1"], "subnets": ["subnet-1", "subnet-2"]},
        )
    )
    assert request["ClusterName"] == "demo"
    assert request["Tags"] == [{"Key": "team", "Value": "ml"}, {"Key": "env", "Value": "dev"}]
    assert request["NodeRecovery"] == "Automatic"
    assert request["NodeProvisioningMode"] == "Continuous"
    assert request["VpcConfig"] == {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1", "subnet-2"]}


def test_defaults_fill_groups_and_a_group_value_wins() -> None:
    data = slurm_spec()
    data["defaults"] = {"execution_role": ROLE, "instance_type": "ml.m5.xlarge", "threads_per_core": 1}
    data["instance_groups"][2]["threads_per_core"] = 2
    del data["instance_groups"][0]["instance_type"]
    groups = _groups(_render(data))
    assert groups["controller"]["InstanceType"] == "ml.m5.xlarge"
    assert groups["gpu"]["InstanceType"] == "ml.g5.8xlarge"
    assert [g["ThreadsPerCore"] for g in groups.values()] == [1, 1, 2]
    assert all(g["ExecutionRole"] == ROLE for g in groups.values())


def test_each_tier_renders_its_own_lifecycle_block_and_ami_overrides_a_default() -> None:
    data = slurm_spec()
    data["defaults"]["lifecycle"] = {"source_s3_uri": BUCKET, "on_create": "on_create.sh"}
    data["instance_groups"][1]["lifecycle"] = {"source_s3_uri": BUCKET, "on_init_complete": "extra.sh"}
    data["instance_groups"][2]["lifecycle"] = "ami"
    groups = _groups(_render(data))
    assert groups["controller"]["LifeCycleConfig"] == {"SourceS3Uri": BUCKET, "OnCreate": "on_create.sh"}
    assert groups["login"]["LifeCycleConfig"] == {"SourceS3Uri": BUCKET, "OnInitComplete": "extra.sh"}
    assert "LifeCycleConfig" not in groups["gpu"]  # AMI-based means no block at all, not an empty one
    assert [tier_of(g) for g in groups.values()] == [Tier.CUSTOM, Tier.AMI_EXTENSION, Tier.AMI]


@pytest.mark.parametrize(
    ("overrides", "with_slurm_config", "expected"),
    [
        ({}, True, {"Slurm": {}}),
        ({"slurm_config_strategy": "Managed"}, True, {"Slurm": {"SlurmConfigStrategy": "Managed"}}),
        ({}, False, None),  # legacy provisioning_parameters.json: no Orchestrator block
        ({"node_provisioning_mode": "Continuous"}, False, {"Slurm": {}}),
        (
            {"orchestrator": "eks", "eks_cluster_arn": "arn:aws:eks:us-east-1:123456789012:cluster/k"},
            False,
            {"Eks": {"ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/k"}},
        ),
    ],
)
def test_orchestrator_block(overrides: dict[str, Any], with_slurm_config: bool, expected: Any) -> None:
    data = slurm_spec(**overrides)
    if not with_slurm_config:
        for g in data["instance_groups"]:
            del g["slurm"]
    assert _render(data).get("Orchestrator") == expected


def test_api_passthrough_reaches_the_request() -> None:
    data = slurm_spec(api={"ClusterRole": "arn:aws:iam::123456789012:role/cluster"})
    data["instance_groups"][2]["api"] = {"ImageId": "ami-0123456789abcdef0", "KubernetesConfig": {}}
    request = _render(data)
    assert request["ClusterRole"] == "arn:aws:iam::123456789012:role/cluster"
    assert _groups(request)["gpu"]["ImageId"] == "ami-0123456789abcdef0"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            slurm_spec(node_recovery="None", api={"NodeRecovery": "Automatic"}),
            "api.NodeRecovery: already set",
        ),
        (slurm_spec(orchestrator="eks"), "eks_cluster_arn: required when orchestrator is eks"),
        (
            slurm_spec(eks_cluster_arn="arn:aws:eks:us-east-1:123456789012:cluster/k"),
            "eks_cluster_arn: only allowed when orchestrator is eks",
        ),
        (
            slurm_spec(slurm_config_strategy="Merge", api={"Orchestrator": {"Slurm": {}}}),
            "slurm_config_strategy: cannot be combined with api.Orchestrator",
        ),
    ],
)
def test_ambiguous_specs_are_refused(data: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message.replace(".", r"\.")):
        _render(data)


def test_group_api_clash_names_the_group() -> None:
    data = slurm_spec()
    data["instance_groups"][2]["api"] = {"InstanceType": "ml.p5.48xlarge"}
    with pytest.raises(SpecError) as info:
        _render(data)
    assert str(info.value.problems[0]) == (
        "error: group 'gpu' instance_groups[2].api.InstanceType: already set by a spec field; set it in one place only"
    )


# --- round trip: any spec renders to the same request after a trip through spec_from_request ---------

_names = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
_lifecycles = st.one_of(
    st.none(),
    st.just("ami"),
    st.fixed_dictionaries(
        {"source_s3_uri": st.just(BUCKET)},
        optional={"on_create": st.just("a.sh"), "on_init_complete": st.just("b.sh")},
    ),
)
_optional_group_fields: dict[str, st.SearchStrategy[Any]] = {
    "min_count": st.integers(0, 10),
    "threads_per_core": st.sampled_from([1, 2]),
    "lifecycle": _lifecycles,
    "ebs_volume_gb": st.integers(1, 16384),
    "deep_health_checks": st.lists(st.sampled_from(["InstanceStress", "InstanceConnectivity"]), unique=True),
    "execution_role": st.just(ROLE + "-own"),
    "slurm": st.fixed_dictionaries(
        {"node_type": st.sampled_from(["Controller", "Login", "Compute"])},
        optional={"partition": st.one_of(_names, st.lists(_names, min_size=2, max_size=3))},
    ),
    "api": st.just({"ScheduledUpdateConfig": {"ScheduleExpression": "cron(0 2 ? * SUN *)"}}),
}


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(_names, min_size=1, max_size=4, unique=True))
    groups = []
    for name in names:
        group = {"name": name, "count": draw(st.integers(0, 20)), "instance_type": "ml.g5.8xlarge"}
        group.update(draw(st.fixed_dictionaries({}, optional=_optional_group_fields)))
        groups.append(group)
    data: dict[str, Any] = {"name": draw(_names), "instance_groups": groups}
    data["defaults"] = draw(
        st.fixed_dictionaries(
            {"execution_role": st.just(ROLE)},
            optional={"lifecycle": _lifecycles, "threads_per_core": st.sampled_from([1, 2])},
        )
    )
    data.update(
        draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "tags": st.dictionaries(_names, _names, max_size=3),
                    "node_recovery": st.sampled_from(["Automatic", "None"]),
                    "node_provisioning_mode": st.just("Continuous"),
                    "slurm_config_strategy": st.sampled_from(["Managed", "Merge"]),
                },
            )
        )
    )
    return data


@settings(max_examples=150, deadline=None)
@given(specs())
def test_request_survives_a_trip_through_a_spec(data: dict[str, Any]) -> None:
    request = _render(data)
    assert render_create_request(spec_from_request(request)) == request


def test_an_orchestrator_block_with_untyped_members_passes_through_whole() -> None:
    request = _render(slurm_spec())
    request["Orchestrator"] = {"Slurm": {"SlurmConfigStrategy": "Merge", "AccountingDatabase": {"Any": "thing"}}}
    spec = spec_from_request(request)
    assert spec.slurm_config_strategy is None and spec.api["Orchestrator"] == request["Orchestrator"]
    assert render_create_request(spec) == request
